"""seqmix's ops on a CUDA GPU against PyTorch's own kernels, in one run (scripts/gpu_check.sh prints this table;
`seqmix bench --device cuda` runs it).

Each row times one call, forward and forward+backward, in bfloat16 inputs (seqmix's ops compute in float32 and
return bfloat16), with CUDA events around 20 repeats after 3 warm-ups, the median of 5 such rounds, peak memory
from torch.cuda.max_memory_allocated. Rows come in groups against a named baseline, the ratio is baseline time over
row time (> 1: faster than the baseline):
  attention        seqmix.attention (auto; torch = SDPA with seqmix's semantics; naive) vs F.scaled_dot_product_attention
  fem_softmax_read seqmix.fem_softmax_read (auto) vs one SDPA call on [v, exp(beta v - cap)] (2 d_v wide), the
                   FEM authors' read, and vs one SDPA call at d_v (what the next issue's fused kernel must approach)
  gla              seqmix.gla (auto) vs its naive twin
Shapes: B, T, H, d = 8, 4096, 16, 64 for the attention-like reads (--quick: 2, 1024, 8, 64); GLA at T=1024 (its
naive twin materialises [B,H,T,T]).

    python3 bench/gpu_bench.py [--quick] [--json FILE]
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

import seqmix


def time_call(fn, backward, warmup=3, repeats=20, rounds=5):
    """Median milliseconds of fn() (and its backward), timed with CUDA events; peak memory in MiB."""
    def once():
        out = fn()
        if backward:
            outs = out if isinstance(out, tuple) else (out,)
            torch.autograd.backward([o for o in outs if o is not None and o.requires_grad],
                                    [torch.ones_like(o) for o in outs if o is not None and o.requires_grad])
    for _ in range(warmup):
        once()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            once()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / repeats)
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**20


def leaves(*tensors):
    return [t.detach().requires_grad_() for t in tensors]


def attention_rows(B, T, H, d):
    q, k, v = leaves(*(torch.randn(B, T, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)))
    sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True).transpose(1, 2)
    rows = [("attention", "torch SDPA (baseline)", sdpa)]
    for impl in ["auto", "torch", "naive"]:
        if impl == "naive" and T > 2048:
            continue  # [B,H,T,T] in float32
        rows.append(("attention", f"seqmix impl={impl}", lambda impl=impl: seqmix.attention(q, k, v, impl=impl)))
    return rows


def fem_rows(B, T, H, d):
    q, k, v = leaves(*(torch.randn(B, T, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)))
    beta = torch.full((H * d,), 1.0, device="cuda", requires_grad=True)
    cap = 40.0

    def authors():
        # The FEM authors' softmax read: one SDPA over the values and their exponentials side by side.
        b = beta.view(1, 1, H, d)
        vc = torch.clamp(v.float(), -cap / b, cap / b)
        both = torch.cat([vc, torch.exp(b * vc - cap)], -1).to(v.dtype)
        r = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), both.transpose(1, 2),
                                           is_causal=True).transpose(1, 2)
        mean, second = r.float().split(d, -1)
        return mean, (torch.log(second.clamp_min(1e-30)) + cap) / b

    one = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=True)
    return [("fem_softmax_read", "SDPA on [v, exp(beta v)] (baseline)", authors),
            ("fem_softmax_read", "one SDPA at d_v", one),
            ("fem_softmax_read", "seqmix impl=auto", lambda: seqmix.fem_softmax_read(q, k, v, beta, cap))]


def gla_rows(B, T, H, d):
    q, k = leaves(*(torch.rand(B, T, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(2)))
    v = leaves(torch.randn(B, T, H, d, device="cuda", dtype=torch.bfloat16))[0]
    log_decay = leaves(F.logsigmoid(torch.randn(B, T, H, device="cuda")) / 16)[0]
    return [("gla", "seqmix impl=naive (baseline)", lambda: seqmix.gla(q, k, v, log_decay, impl="naive")),
            ("gla", "seqmix impl=auto", lambda: seqmix.gla(q, k, v, log_decay))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    parser.add_argument("--json", help="also write the rows to this file (-: print only the JSON, no table)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_bench: no GPU visible (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    table = args.json != "-"
    say = print if table else (lambda *a, **k: None)
    B, T, H, d = (2, 1024, 8, 64) if args.quick else (8, 4096, 16, 64)
    gla_T = min(T, 1024)
    groups = [(f"B={B} T={T} H={H} d={d}", attention_rows(B, T, H, d)),
              (f"B={B} T={T} H={H} d={d}", fem_rows(B, T, H, d)),
              (f"B={B} T={gla_T} H={H} d={d}", gla_rows(B, gla_T, H, d))]
    say(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16 inputs, median ms of 5 x 20 calls")
    header = f"{'op':<17} {'implementation':<38} {'shape':<26} {'fwd ms':>9} {'fwd+bwd ms':>11} {'peak MiB':>9} {'x fwd':>7} {'x fwd+bwd':>10}"
    say(header)
    say("-" * len(header))
    results = []
    for shape, rows in groups:
        baseline = None
        for op, name, fn in rows:
            try:
                fwd, _ = time_call(fn, backward=False)
                both, peak = time_call(fn, backward=True)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
                say(f"{op:<17} {name:<38} {shape:<26} failed: {str(error).splitlines()[0][:80]}")
                torch.cuda.empty_cache()
                continue
            if baseline is None:
                baseline = (fwd, both)
            row = {"op": op, "implementation": name, "shape": shape, "forward_ms": fwd, "forward_backward_ms": both,
                   "peak_mib": peak, "speedup_forward": baseline[0] / fwd, "speedup_forward_backward": baseline[1] / both}
            results.append(row)
            say(f"{op:<17} {name:<38} {shape:<26} {fwd:>9.3f} {both:>11.3f} {peak:>9.0f} "
                  f"{row['speedup_forward']:>7.2f} {row['speedup_forward_backward']:>10.2f}")
            torch.cuda.empty_cache()
    record = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": results}
    if args.json == "-":
        print(json.dumps(record))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
