"""seqmix's ops on a CUDA GPU against PyTorch's own kernels, in one run (scripts/gpu_check.sh prints this table;
`seqmix bench --device cuda` runs it).

Each row times one call, forward and forward+backward, in bfloat16 inputs (seqmix's ops compute in float32 and
return bfloat16), with CUDA events around rounds of up to 20 calls (about 100 ms) after 3 warm-ups, the median of 5
rounds, peak memory from torch.cuda.max_memory_allocated. Rows come in groups against a named baseline, the ratio is baseline time over
row time (> 1: faster than the baseline):
  attention        seqmix.attention (auto; torch = SDPA with seqmix's semantics; naive) vs F.scaled_dot_product_attention
  fem_softmax_read seqmix.fem_softmax_read (auto, and fused: seqmix's Triton kernels) vs one SDPA call on
                   [v, exp(beta v - cap)] (2 d_v wide), the FEM authors' read, and vs one SDPA call at d_v (the
                   kernel's targets: faster than the first, at most 1.3x the second), also at T = 16384
  gla              seqmix.gla (auto: the chunked ATen form; fused: seqmix's Triton kernels) vs its naive twin,
                   per-head decay
  gla per key      seqmix.gla (auto, and fused: seqmix's Triton kernels) with a decay per key feature at d = 128 vs
                   flash-linear-attention's chunk_gla (fla-core from third_party/wheels, where it imports; the naive
                   twin would hold [B,H,T,T,dk]; the fused kernels' target: at most 1.0x chunk_gla), and one line
                   comparing their outputs
  fem_sm / fem_gla / hyperglu layers: a seqmix.Mixer against the same layer in plain PyTorch with the same weights
                   (python/reference: FEM-SM reading both value streams with one SDPA call, as the FEM authors'
                   layer does; FEM-GLA and HyperGLU with their explicit T x T weights, as the authors' layers
                   materialise them), both under bf16 autocast over float32 weights, as a training step runs them
Shapes: B, T, H, d = 8, 4096, 16, 64 for the attention-like reads (--quick: 2, 1024, 8, 64); GLA at T=1024 (its
naive twin materialises [B,H,T,T]); the layers at the FEM paper's GPT-2 small width, B, T, D, H = 8, 1024, 768, 12
(--quick: 2, 256, 256, 4).

    python3 bench/gpu_bench.py [--quick] [--json FILE]
"""
import argparse
import inspect
import json
import os
import statistics
import sys

import time

import torch
import torch.nn.functional as F

import seqmix

DEVICE = torch.device("cuda")  # --dry-run: the CPU
TIMING = (3, 5, 100.0)  # warm-up calls, rounds, milliseconds per round (--dry-run: one call each)


def time_call(fn, backward):
    """Median milliseconds of fn() (and its backward) over `rounds` rounds of about round_ms each (at least one call),
    after `warmup` calls: timed with CUDA events on the GPU (host clock on the CPU dry run); peak memory in MiB (the
    GPU's allocator; 0 on the CPU)."""
    def once():
        out = fn()
        if backward:
            outs = out if isinstance(out, tuple) else (out,)
            torch.autograd.backward([o for o in outs if o is not None and o.requires_grad],
                                    [torch.ones_like(o) for o in outs if o is not None and o.requires_grad])

    def timed(calls):
        if DEVICE.type != "cuda":
            begin = time.perf_counter()
            for _ in range(calls):
                once()
            return (time.perf_counter() - begin) * 1e3
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            once()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    warmup, rounds, round_ms = TIMING
    repeats = max(1, min(20, int(round_ms / max(timed(warmup) / warmup, 1e-3))))
    if DEVICE.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = [timed(repeats) / repeats for _ in range(rounds)]
    peak = torch.cuda.max_memory_allocated() / 2**20 if DEVICE.type == "cuda" else 0.0
    return statistics.median(times), peak


def leaves(*tensors):
    return [t.detach().requires_grad_() for t in tensors]


def attention_rows(B, T, H, d):
    q, k, v = leaves(*(torch.randn(B, T, H, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(3)))
    sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True).transpose(1, 2)
    rows = [("attention", "torch SDPA (baseline)", sdpa)]
    for impl in ["auto", "torch", "naive"]:
        if impl == "naive" and T > 2048:
            continue  # [B,H,T,T] in float32
        rows.append(("attention", f"seqmix impl={impl}", lambda impl=impl: seqmix.attention(q, k, v, impl=impl)))
    return rows


FEM_FUSED = "seqmix impl=fused (Triton kernels)"
GLA_FUSED = "seqmix impl=fused (Triton kernels)"


def fem_rows(B, T, H, d):
    q, k, v = leaves(*(torch.randn(B, T, H, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(3)))
    beta = torch.full((H * d,), 1.0, device=DEVICE, requires_grad=True)
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
            ("fem_softmax_read", "seqmix impl=auto", lambda: seqmix.fem_softmax_read(q, k, v, beta, cap)),
            # seqmix's Triton kernels read the four inputs in one dtype.
            ("fem_softmax_read", FEM_FUSED,
             lambda: seqmix.fem_softmax_read(q, k, v, beta.to(v.dtype), cap, impl="fused"))]


def gla_rows(B, T, H, d):
    q, k = leaves(*(torch.rand(B, T, H, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(2)))
    v = leaves(torch.randn(B, T, H, d, device=DEVICE, dtype=torch.bfloat16))[0]
    log_decay = leaves(F.logsigmoid(torch.randn(B, T, H, device=DEVICE)) / 16)[0]
    return [("gla", "seqmix impl=naive (baseline)", lambda: seqmix.gla(q, k, v, log_decay, impl="naive")),
            ("gla", "seqmix impl=auto", lambda: seqmix.gla(q, k, v, log_decay)),
            ("gla", GLA_FUSED, lambda: seqmix.gla(q, k, v, log_decay, impl="fused"))]


def reference_options(spec, function):
    """The keyword arguments of a python/reference layer from a mixer's resolved spec: the keys it takes, typed as
    its defaults."""
    accepted = inspect.signature(function).parameters
    out = {}
    for item in spec.partition(":")[2].split(","):
        key, _, value = item.partition("=")
        if key not in accepted or key == "impl" or value == "auto":  # auto: the reference's own default rule
            continue
        default = accepted[key].default
        out[key] = (value == "1" if isinstance(default, bool) else int(value) if isinstance(default, int)
                    else float(value) if isinstance(default, float) else value)
    return out


def layer_rows(B, T, D, H):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "reference"))
    import fem_reference
    import hyper_energy_reference

    x = torch.randn(B, T, D, device=DEVICE, requires_grad=True)
    rows = []

    def autocast(fn):
        # The references make their masks and rotations with torch's factories: on the device by default here.
        def run():
            with DEVICE, torch.autocast(DEVICE.type, dtype=torch.bfloat16):
                return fn()
        return run

    for name, prior, sdpa in (("fem_sm layer", "softmax", True), ("fem_gla layer", "gla", False)):
        mixer = seqmix.Mixer(f"fem:prior={prior},heads={H}", D, T).to(DEVICE)
        weights = dict(mixer.named_parameters())
        options = reference_options(mixer.spec, fem_reference.fem_reference)
        baseline = "plain PyTorch, one SDPA read" if sdpa else "plain PyTorch, explicit T x T"
        rows.append((name, f"{baseline} (baseline)", autocast(
            lambda weights=weights, options=options, sdpa=sdpa:
            fem_reference.fem_reference(x, weights, read_with_sdpa=sdpa, **options))))
        rows.append((name, "seqmix", autocast(lambda mixer=mixer: mixer(x))))
    mixer = seqmix.Mixer(f"hyperglu:heads={H}", D, T).to(DEVICE)
    weights = dict(mixer.named_parameters())
    o = dict(item.split("=", 1) for item in mixer.spec.partition(":")[2].split(","))
    rows.append(("hyperglu layer", "plain PyTorch, explicit T x T (baseline)", autocast(
        lambda: hyper_energy_reference.hypermlp_reference(
            x, weights, label=o.get("variant", "G-cg-q-12o"), heads=int(o["heads"]),
            rope_theta=float(o.get("rope_theta", 10000)), eps=float(o.get("eps", 1e-12)), bias=o.get("bias") == "1"))))
    rows.append(("hyperglu layer", "seqmix", autocast(lambda: mixer(x))))
    return rows


def fla_chunk_gla():
    """flash-linear-attention's chunk_gla (fla-core from third_party/wheels, Triton kernels), or the reason it is not
    there (not installed, or no Triton on this machine)."""
    try:
        from fla.ops.gla import chunk_gla
        return chunk_gla
    except Exception as error:  # ImportError, or Triton failing to start
        return f"{type(error).__name__}: {str(error).splitlines()[0][:80] if str(error) else ''}"


def gla_per_key_inputs(B, T, H, d):
    q, k = leaves(*(torch.rand(B, T, H, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(2)))
    v = leaves(torch.randn(B, T, H, d, device=DEVICE, dtype=torch.bfloat16))[0]
    log_decay = leaves(F.logsigmoid(torch.randn(B, T, H, d, device=DEVICE)) / 16)[0]
    return q, k, v, log_decay


def gla_per_key_rows(B, T, H, d):
    """fla's chunk_gla is the baseline where it imports (o = (q d^-1/2) S; seqmix.gla with that scale computes the same
    numerator, and its normaliser besides)."""
    q, k, v, log_decay = gla_per_key_inputs(B, T, H, d)
    rows = []
    chunk_gla = fla_chunk_gla()
    if callable(chunk_gla) and DEVICE.type == "cuda":
        rows.append(("gla per key", "fla chunk_gla (baseline)", lambda: chunk_gla(q, k, v, log_decay.to(q.dtype))[0]))
    rows.append(("gla per key", "seqmix impl=auto", lambda: seqmix.gla(q, k, v, log_decay, scale=d ** -0.5)))
    rows.append(("gla per key", GLA_FUSED, lambda: seqmix.gla(q, k, v, log_decay, scale=d ** -0.5, impl="fused")))
    return rows


def gla_agreement(B, T, H, d):
    """One line: fla's chunk_gla output against seqmix.gla's numerator at the benchmark's inputs (bf16 tolerance), or
    why fla did not run."""
    chunk_gla = fla_chunk_gla()
    if not callable(chunk_gla) or DEVICE.type != "cuda":
        return f"fla chunk_gla: not run ({chunk_gla if not callable(chunk_gla) else 'no GPU'})"
    q, k, v, log_decay = gla_per_key_inputs(B, T, H, d)
    with torch.no_grad():
        theirs = chunk_gla(q, k, v, log_decay.to(q.dtype))[0].float()
        ours = seqmix.gla(q, k, v, log_decay, scale=d ** -0.5)[0].float()
    error = ((theirs - ours).abs().max() / ours.abs().max().clamp_min(1.0)).item()
    return (f"fla chunk_gla vs seqmix.gla at B={B} T={T} H={H} d={d}: max |difference| {error:.2e} of the largest "
            f"output ({'within' if error < 3e-2 else 'beyond'} bf16's 3e-2)")


# Dense bfloat16 tensor-core peaks (NVIDIA's data sheets, SXM parts), for the fraction of peak the kernels reach.
BF16_PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0}


def fem_targets(results, device_name):
    """The FEM softmax read's targets (issue: faster than the FEM authors' one SDPA call over [v, exp(beta v)], at
    most 1.3x one SDPA call at d_v; fwd+bwd, bf16) per shape, met or not, and the fused kernel's fraction of the
    GPU's bf16 peak: causal products of widths dk + 2 dv forward and 4 dk + 6 dv forward+backward (README.md)."""
    lines = []
    peak = next((p for name, p in BF16_PEAK_TFLOPS.items() if name in device_name), None)
    for shape in dict.fromkeys(r["shape"] for r in results if r["op"] == "fem_softmax_read"):
        rows = {r["implementation"]: r for r in results if r["op"] == "fem_softmax_read" and r["shape"] == shape}
        fused = rows.get(FEM_FUSED)
        authors, one = rows.get("SDPA on [v, exp(beta v)] (baseline)"), rows.get("one SDPA at d_v")
        if not (fused and authors and one):
            lines.append(f"target fem_softmax_read {shape}: not measured (a row failed)")
            continue
        ms = fused["forward_backward_ms"]
        vs_authors, vs_one = authors["forward_backward_ms"] / ms, ms / one["forward_backward_ms"]
        sizes = dict(item.split("=") for item in shape.split())
        B, T, H, d = (int(sizes[key]) for key in ("B", "T", "H", "d"))
        flops = 2.0 * B * H * T * (T + 1) / 2 * (4 * d + 6 * d)
        fraction = f"{flops / (ms * 1e-3) / (peak * 1e12):.1%} of the bf16 peak ({peak} TFLOPS)" if peak else \
            "peak of this GPU unknown"
        lines.append(f"target fem_softmax_read {shape}: fused fwd+bwd {ms:.3f} ms; {vs_authors:.2f}x the authors' "
                     f"read ({'met' if vs_authors > 1 else 'not met'}: > 1); {vs_one:.2f}x the time of SDPA at d_v "
                     f"({'met' if vs_one <= 1.3 else 'not met'}: <= 1.3); {fraction}")
    return lines


def gla_targets(results):
    """The chunked GLA kernels' target (issue: within 1.0x of flash-linear-attention's chunk_gla, fwd+bwd, bf16, decay
    per key), met or not."""
    lines = []
    for shape in dict.fromkeys(r["shape"] for r in results if r["op"] == "gla per key"):
        rows = {r["implementation"]: r for r in results if r["op"] == "gla per key" and r["shape"] == shape}
        fused, fla = rows.get(GLA_FUSED), rows.get("fla chunk_gla (baseline)")
        if not (fused and fla):
            lines.append(f"target gla per key {shape}: not measured ({'no fla baseline' if fused else 'a row failed'})")
            continue
        ratio = fused["forward_backward_ms"] / fla["forward_backward_ms"]
        lines.append(f"target gla per key {shape}: fused fwd+bwd {fused['forward_backward_ms']:.3f} ms; {ratio:.2f}x "
                     f"the time of fla's chunk_gla ({'met' if ratio <= 1.0 else 'not met'}: <= 1.0)")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    parser.add_argument("--dry-run", action="store_true",
                        help="every row once at tiny shapes on the CPU, host-clock timed: checks the script, measures "
                             "nothing (tests/bench: bench.gpu_bench_dry_run)")
    parser.add_argument("--json", help="also write the rows to this file (-: print only the JSON, no table)")
    args = parser.parse_args(argv)
    global DEVICE, TIMING
    if args.dry_run:
        DEVICE, TIMING = torch.device("cpu"), (1, 1, 0.0)
    elif not torch.cuda.is_available():
        print("gpu_bench: no GPU visible (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    table = args.json != "-"
    say = print if table else (lambda *a, **k: None)
    B, T, H, d = (1, 64, 2, 16) if args.dry_run else (2, 1024, 8, 64) if args.quick else (8, 4096, 16, 64)
    gla_T = min(T, 1024)
    LB, LT, LD, LH = (1, 32, 32, 2) if args.dry_run else (2, 256, 256, 4) if args.quick else (8, 1024, 768, 12)
    layers = f"B={LB} T={LT} D={LD} H={LH}"
    layer_groups = {}
    for op, name, fn in layer_rows(LB, LT, LD, LH):
        layer_groups.setdefault(op, []).append((op, name, fn))
    groups = [(f"B={B} T={T} H={H} d={d}", attention_rows(B, T, H, d)),
              (f"B={B} T={T} H={H} d={d}", fem_rows(B, T, H, d)),
              (f"B={B} T={4 * T} H={H} d={d}", fem_rows(B, 4 * T, H, d)),
              (f"B={B} T={gla_T} H={H} d={d}", gla_rows(B, gla_T, H, d)),
              (f"B={B} T={T} H={H} d={2 * d}", gla_per_key_rows(B, T, H, 2 * d))] + \
             [(layers, rows) for rows in layer_groups.values()]
    device_name = torch.cuda.get_device_name() if DEVICE.type == "cuda" else "CPU (dry run: no timings to read)"
    say(f"GPU: {device_name}, torch {torch.__version__}, bf16, median ms per call of 5 rounds")
    header = f"{'op':<17} {'implementation':<42} {'shape':<26} {'fwd ms':>9} {'fwd+bwd ms':>11} {'peak MiB':>9} {'x fwd':>7} {'x fwd+bwd':>10}"
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
                if args.dry_run:
                    raise
                say(f"{op:<17} {name:<42} {shape:<26} failed: {str(error).splitlines()[0][:80]}")
                if DEVICE.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            if baseline is None:
                baseline = (fwd, both)
            row = {"op": op, "implementation": name, "shape": shape, "forward_ms": fwd, "forward_backward_ms": both,
                   "peak_mib": peak, "speedup_forward": baseline[0] / fwd, "speedup_forward_backward": baseline[1] / both}
            results.append(row)
            say(f"{op:<17} {name:<42} {shape:<26} {fwd:>9.3f} {both:>11.3f} {peak:>9.0f} "
                  f"{row['speedup_forward']:>7.2f} {row['speedup_forward_backward']:>10.2f}")
            if DEVICE.type == "cuda":
                torch.cuda.empty_cache()
    for line in fem_targets(results, device_name) + gla_targets(results) + [gla_agreement(B, T, H, 2 * d)]:
        say(("dry run, not a measurement: " if args.dry_run else "") + line)
    record = {"gpu": device_name, "torch": torch.__version__, "rows": results}
    if args.json == "-":
        print(json.dumps(record))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
