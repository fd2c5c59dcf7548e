"""What one call of a seqmix Python module costs, eager, on the CPU: the forward alone (no gradients) and the forward
with its backward, for a Mixer and a LanguageModel, next to the C++ module's own forward called directly (the
TorchScript object the Python module wraps: the layers' work without the Python module's per-call binding).

Each row is the median of --rounds rounds of --calls calls, after 3 warm-up calls, single process, the threads torch
uses (--threads to set them). The "direct" column is the C++ forward on the same inputs with the same weights.

    .venv/bin/python bench/python_module_calls.py [--threads 1] [--rounds 7] [--calls 20] [--json FILE]
"""
import argparse
import json
import statistics
import time

import torch

import seqmix

CASES = [
    # (label, build, inputs): tiny (the per-call overhead alone), small and mid sizes (next to the layers' work)
    ("Mixer softmax:heads=2 1x4x8 (tiny)", lambda: seqmix.Mixer("softmax:heads=2", 8, 4), lambda: torch.randn(1, 4, 8)),
    ("LanguageModel 2x[softmax] d8 1x4 (tiny)",
     lambda: seqmix.LanguageModel(vocab_size=16, mixers=["softmax:heads=2"], dim=8, layers=2),
     lambda: torch.randint(0, 16, (1, 4))),
    ("Mixer fem:prior=gla 4x512x128", lambda: seqmix.Mixer("fem:prior=gla", 128, 512),
     lambda: torch.randn(4, 512, 128)),
    ("Mixer softmax:heads=4 2x64x64", lambda: seqmix.Mixer("softmax:heads=4", 64, 64), lambda: torch.randn(2, 64, 64)),
    ("LanguageModel 2x[fem:prior=gla,softmax] d128 4x256",
     lambda: seqmix.LanguageModel(vocab_size=256, mixers=["fem:prior=gla", "softmax:heads=4"], dim=128, layers=2),
     lambda: torch.randint(0, 256, (4, 256))),
    ("LanguageModel 2x[softmax] d64 2x32",
     lambda: seqmix.LanguageModel(vocab_size=64, mixers=["softmax:heads=4"], dim=64, layers=2),
     lambda: torch.randint(0, 64, (2, 32))),
]


def median_ms(fn, rounds, calls):
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - begin) / calls * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = []
    print(f"{'case':52s} {'forward ms':>11s} {'direct ms':>10s} {'fwd+bwd ms':>11s}")
    for label, build, inputs in CASES:
        torch.manual_seed(0)
        module, x = build(), inputs()
        bound = module._bound

        def forward():
            with torch.no_grad():
                module(x)

        def direct():
            with torch.no_grad():
                bound.forward(x)

        def forward_backward():
            module.zero_grad(set_to_none=True)
            module(x).float().square().mean().backward()

        row = {"case": label, "forward_ms": median_ms(forward, args.rounds, args.calls),
               "direct_ms": median_ms(direct, args.rounds, args.calls),
               "forward_backward_ms": median_ms(forward_backward, args.rounds, max(1, args.calls // 2))}
        rows.append(row)
        print(f"{label:52s} {row['forward_ms']:11.3f} {row['direct_ms']:10.3f} {row['forward_backward_ms']:11.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": torch.get_num_threads(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
