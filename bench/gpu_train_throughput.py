"""Training throughput of the lm model at GPT-2 small, one mixer per row, against the SDPA GPT (the FEM paper's
Table 7 setting: GPT-2 small, T = 1024, B = 8, train tokens/s of FEM-SM against the softmax-attention GPT; the
paper measured 0.79x on an L40S in float32).

Each row builds seqmix.LanguageModel(vocab 50257, dim 768, 12 layers, 12 heads, GPT-2's block: layer norm, a 4x
GELU MLP, learned positions, tied head) with one mixer spec, and times full training steps on random token ids:
forward, cross-entropy, backward and AdamW's update, in float32 (PyTorch's defaults: no TF32 matrix products) and
under bf16 autocast over float32 weights (--dtype bf16). Timing: CUDA events around rounds of `steps` steps after
`warmup` steps, the median of `rounds` rounds; tokens/s = B T steps / time; ratio = the row's tokens/s over the
first row's (> 1: faster than the SDPA GPT). Peak memory from torch.cuda.max_memory_allocated.

    python3 bench/gpu_train_throughput.py [--dtype fp32|bf16] [--json FILE]
    python3 bench/gpu_train_throughput.py --dry-run    # every row once at tiny shapes on the CPU (its numbers mean nothing)
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import seqmix

# The SDPA GPT first (the baseline), then FEM-SM (FEM's softmax prior: one read of [v, exp(beta v - cap)]).
MIXERS = [("SDPA GPT (baseline)", "softmax:heads=12"), ("FEM-SM", "fem:prior=softmax,heads=12")]
GPT2_SMALL = dict(vocab=50257, dim=768, layers=12, heads=12, B=8, T=1024)
DRY_RUN = dict(vocab=97, dim=32, layers=2, heads=2, B=2, T=16)


def spec_of(mixer, shape):
    return mixer.replace("heads=12", f"heads={shape['heads']}")


def model_of(mixer, shape, device):
    return seqmix.LanguageModel(shape["vocab"], [spec_of(mixer, shape)], dim=shape["dim"], layers=shape["layers"],
                                max_len=shape["T"], channel="mlp", norm="layer", pos="learned", tie=True,
                                head_bias=False).to(device)


def time_training(model, shape, device, dtype, warmup, rounds, steps):
    """Median seconds per training step and the peak memory in MiB."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, shape["vocab"], (shape["B"], shape["T"] + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if not torch.isfinite(loss):
            raise SystemExit(f"gpu_train_throughput: the loss is {loss.item()} (a training step went wrong)")

    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(rounds):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(steps):
                step()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1000.0 / steps)
        else:
            begin = time.perf_counter()
            for _ in range(steps):
                step()
            times.append((time.perf_counter() - begin) / steps)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    return statistics.median(times), peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                        help="fp32 (the paper's setting) or bf16 autocast over float32 weights")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--dry-run", action="store_true", help="every row once at tiny shapes on the CPU")
    args = parser.parse_args(argv)
    if args.dry_run:
        device, shape, timing = torch.device("cpu"), DRY_RUN, (0, 1, 1)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("gpu_train_throughput: no GPU is visible (torch.cuda.is_available() is False); "
                             "--dry-run runs it on the CPU")
        device, shape, timing = torch.device("cuda"), GPT2_SMALL, (3, 3, 5)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (dry run)"
    print(f"train tokens/s, lm at dim {shape['dim']}, {shape['layers']} layers, {shape['heads']} heads, vocab "
          f"{shape['vocab']}, B {shape['B']}, T {shape['T']}, {args.dtype}, AdamW; {name}, torch {torch.__version__}; "
          f"median of {timing[1]} rounds of {timing[2]} steps after {timing[0]} warm-up steps", flush=True)
    rows = []
    for label, mixer in MIXERS:
        torch.manual_seed(0)
        model = model_of(mixer, shape, device)
        seconds, peak = time_training(model, shape, device, args.dtype, *timing)
        tokens_per_s = shape["B"] * shape["T"] / seconds
        ratio = tokens_per_s / rows[0]["tokens_per_s"] if rows else 1.0
        rows.append({"row": label, "mixer": spec_of(mixer, shape), "dtype": args.dtype, "ms_per_step": seconds * 1e3,
                     "tokens_per_s": tokens_per_s, "ratio": ratio, "peak_mib": peak, "device": name})
        print(f"  {label:<22} {spec_of(mixer, shape):<30} {seconds * 1e3:9.1f} ms/step {tokens_per_s:11.0f} tokens/s "
              f"{ratio:6.2f}x  peak {peak:8.0f} MiB", flush=True)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
