#!/usr/bin/env python3
"""Checks that docs/results.md quotes every kept three-seed table as its records give it.

Usage: seeds_in_results.py RESULTS_MD RUNS_DIR
Every RUNS_DIR/*/*/seeds.json (written by `seqmix train --seeds`, kept by scripts/keep_run_records.sh) must
appear in results.md as "MEAN ± STD" of its run's metric (the one summary.json names), the mean with four
decimals and the standard deviation with four or five. Exits 1 naming each table that results.md does not
quote.
"""
import json
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = Path(sys.argv[1]).read_text()
    tables = sorted(Path(sys.argv[2]).glob("*/*/seeds.json"))
    problems = []
    if not tables:
        problems.append(f"no seeds.json under {sys.argv[2]}")
    for path in tables:
        table = json.loads(path.read_text())
        first = path.parent / f"seed-{table['seeds'][0]}" / "summary.json"
        metric = json.loads(first.read_text())["metric"]
        mean, std = table["mean"][metric], table["std"][metric]
        quoted = [f"{mean:.4f} ± {std:.4f}", f"{mean:.4f} ± {std:.5f}"]
        if not any(q in text for q in quoted):
            problems.append(f"{path.parent}: results.md does not quote its {metric} {quoted[0]}")
    for p in problems:
        print("seeds_in_results:", p)
    if problems:
        sys.exit(1)
    print(f"seeds_in_results: results.md quotes all {len(tables)} kept three-seed tables")


if __name__ == "__main__":
    main()
