"""Packed vs padded: the fused attention and GLA ops on N sequences of mixed lengths, once packed into one row
with cu_seqlens and once padded to the longest (a [N, T_max] batch; attention with a key_mask, GLA with zero
decay and zero keys at the padding so it adds nothing). Both forms run alternately in one process and the
medians are compared, forward and forward + backward, fp32.

    .venv/bin/python scripts/bench_packed.py [--repeats 7] [--threads 2]

The default length mix is the line lengths (in characters, capped at 1,024) of 32 consecutive paragraphs of
Tiny Shakespeare when ../shared/data holds it, else a fixed mix of the same spread."""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import seqmix  # noqa: E402

H, D = 8, 64
FIXED_MIX = [12, 40, 75, 128, 210, 33, 512, 96, 17, 300, 64, 1024, 150, 48, 700, 22]


def shakespeare_lengths(count=32, cap=1024):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "text", "tinyshakespeare.txt")
    if not os.path.exists(path):
        return None
    paragraphs = [p for p in open(path, encoding="utf-8").read().split("\n\n") if p.strip()]
    return [min(cap, len(p)) for p in paragraphs[100:100 + count]]


def timed(fn, backward):
    start = time.perf_counter()
    out = fn()
    if backward:
        sum(o.float().sum() for o in (out if isinstance(out, tuple) else (out,))).backward()
    return (time.perf_counter() - start) * 1e3


def cases(lengths):
    n, total, longest = len(lengths), sum(lengths), max(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.long)
    real = torch.zeros(n, longest, dtype=torch.bool)
    for i, length in enumerate(lengths):
        real[i, :length] = True

    def leaf(*shape, positive=False):
        x = torch.rand(*shape) + 0.1 if positive else torch.randn(*shape)
        return x.requires_grad_()

    packed_qkv = [leaf(1, total, H, D) for _ in range(3)]
    padded_qkv = [leaf(n, longest, H, D) for _ in range(3)]
    packed_gla = [leaf(1, total, H, D, positive=True), leaf(1, total, H, D, positive=True), leaf(1, total, H, D)]
    padded_gla = [leaf(n, longest, H, D, positive=True), leaf(n, longest, H, D, positive=True), leaf(n, longest, H, D)]
    packed_decay = (torch.nn.functional.logsigmoid(torch.randn(1, total, H)) / 16).requires_grad_()
    padded_decay = (torch.nn.functional.logsigmoid(torch.randn(n, longest, H)) / 16).requires_grad_()
    pad = real[..., None, None].float()
    return {
        "attention": (lambda: seqmix.attention(*packed_qkv, cu_seqlens=cu),
                      lambda: seqmix.attention(*padded_qkv, key_mask=real)),
        "gla": (lambda: seqmix.gla(*packed_gla, packed_decay, cu_seqlens=cu),
                lambda: seqmix.gla(padded_gla[0], padded_gla[1] * pad, padded_gla[2], padded_decay * real[..., None])),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lengths = shakespeare_lengths() or FIXED_MIX
    source = "Tiny Shakespeare paragraphs" if lengths is not FIXED_MIX else "the fixed mix"
    n, total, longest = len(lengths), sum(lengths), max(lengths)
    print(f"{n} sequences from {source}: {total} tokens, longest {longest}, padded {n * longest} positions "
          f"({n * longest / total:.2f}x the tokens); H={H}, d={D}, fp32, {args.threads} threads, "
          f"median of {args.repeats}, packed and padded alternating")
    print("| op | pass | packed ms | padded ms | padded / packed |")
    print("|---|---|---|---|---|")
    for name, (packed, padded) in cases(lengths).items():
        for backward in (False, True):
            timed(packed, backward), timed(padded, backward)  # warm-up
            times = {"packed": [], "padded": []}
            for _ in range(args.repeats):
                times["packed"].append(timed(packed, backward))
                times["padded"].append(timed(padded, backward))
            a, b = statistics.median(times["packed"]), statistics.median(times["padded"])
            print(f"| {name} | {'fwd+bwd' if backward else 'fwd'} | {a:.1f} | {b:.1f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
