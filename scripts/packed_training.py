"""Packed vs padded training: `seqmix train` on the text task's paragraphs of Tiny Shakespeare, once with each
paragraph in a row of its own padded to the batch's longest (documents=paragraphs) and once packed whole into
full rows (documents=paragraphs,pack=1), same model, batch and steps. Reports the scored tokens per second (real
next-token targets trained on, padding excluded) from each run's metrics.jsonl: the median over its log
intervals after the first (warm-up).

    .venv/bin/python scripts/packed_training.py [--mixers softmax,gla] [--steps 100] [--threads 2]

Runs go to a temporary folder (or --out); the seqmix binary is build/seqmix (or $SEQMIX_BINARY)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def scored_rates(run):
    rates = []
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            if j.get("split") == "train" and "scored_tokens_per_s" in j:
                rates.append((j["tokens_per_s"], j["scored_tokens_per_s"]))
    if len(rates) < 2:
        sys.exit(f"packed_training: {run}/metrics.jsonl has fewer than two log intervals; raise --steps")
    return rates[1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mixers", default="softmax,gla")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    binary = os.environ.get("SEQMIX_BINARY", os.path.join(ROOT, "build", "seqmix"))
    out = args.out or tempfile.mkdtemp(prefix="seqmix-packed-training-")
    print("| mixer | rows | positions/s | scored tokens/s | packed / padded |")
    print("|---|---|---|---|---|")
    for mixer in args.mixers.split(","):
        scored = {}
        for pack in (0, 1):
            run = os.path.join(out, f"{mixer}-pack{pack}")
            command = [binary, "train", "--task", f"text:documents=paragraphs,pack={pack},num_test=16",
                       "--mixer", mixer, "--steps", str(args.steps), "--eval-every", "0",
                       "--threads", str(args.threads), "--set", f"train.log_every={max(1, args.steps // 5)}",
                       "--out", run]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"packed_training: {' '.join(command)} failed: {done.stderr.strip()[-400:]}")
            rates = scored_rates(run)
            positions = statistics.median(r[0] for r in rates)
            scored[pack] = statistics.median(r[1] for r in rates)
            ratio = f"{scored[1] / scored[0]:.2f}x" if pack == 1 else ""
            print(f"| {mixer} | {'packed' if pack else 'padded'} | {positions:.0f} | {scored[pack]:.0f} | {ratio} |",
                  flush=True)


if __name__ == "__main__":
    main()
