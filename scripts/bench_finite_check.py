"""What finite inputs pay for "non-finite values stay causal" (causal_outputs in src/ops/common/padding.h): each
causal op sums its key-side inputs once to prove them finite. Times the fused op (the sums inside it) and the
same sums alone, medians of 7 in one process, B = 4, T = 1024, H = 8, d = 64, fp32.

    .venv/bin/python scripts/bench_finite_check.py [--threads 2]"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import seqmix  # noqa: E402


def median_ms(f, repeats=7):
    f()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, T, H, d = 4, 1024, 8, 64
    q, k, v = (torch.randn(B, T, H, d) for _ in range(3))
    log_decay = torch.nn.functional.logsigmoid(torch.randn(B, T, H)) / 16
    qp, kp = q.relu() + 1e-6, k.relu() + 1e-6
    cases = [("attention", lambda: seqmix.attention(q, k, v, True), (k, v)),
             ("gla", lambda: seqmix.gla(qp, kp, v, log_decay), (kp, v, log_decay)),
             ("linear_attention", lambda: seqmix.linear_attention(qp, kp, v, True), (kp, v))]
    print("| op | op ms (sums inside) | sums alone ms | share |")
    print("|---|---|---|---|")
    for name, op, key_side in cases:
        op_ms = median_ms(op)
        sums_ms = median_ms(lambda: [x.sum().item() for x in key_side])
        print(f"| {name} | {op_ms:.2f} | {sums_ms:.2f} | {100 * sums_ms / op_ms:.1f}% |")


if __name__ == "__main__":
    main()
