#!/usr/bin/env python3
"""Checks that docs/results.md quotes the MAD table its kept run records produce.

Usage: mad_table_in_results.py RESULTS_MD TABLE_DIR [HEADER]
TABLE_DIR is the output of `scripts/mad_table.sh DIR --preset cpu --finished-only` on a copy of
docs/runs/mad-cpu: its mixers/, momenmha/ and nagmha/ folders each hold the mad.md that `seqmix mad` wrote;
or a folder with one mad.md (the three-seed table of `scripts/three_seeds.sh OUT 1 mad_table`, OUT/mad).
Every row of those tables must be a row of results.md's table that starts with HEADER (default
"| row | mixer spec |", the single-seed table) with the same seven cells (six tasks and the average, "mean ±
std" over seeds), and that table must have no row the records do not back. Exits 1 naming each difference.
"""
import re
import sys
from pathlib import Path

TASK_COLUMNS = 7  # in-context, fuzzy, noisy, selective copy, compression, memorization, average


def cells(line):
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


def table_rows_from_records(table_dir):
    """{mixer spec as results.md writes it: cells} from the mad.md files under table_dir."""
    rows = {}
    single = (Path(table_dir) / "mad.md").exists()
    for part in ("",) if single else ("mixers", "momenmha", "nagmha"):
        for line in (Path(table_dir) / part / "mad.md").read_text().splitlines():
            if not line.startswith("| `"):
                continue
            c = cells(line)
            spec = c[0].strip("`")
            # seqmix mad names a residual block "softmax with residual=momentum"; results.md writes
            # "`softmax` with `--residual momentum`".
            m = re.fullmatch(r"(.*) with residual=(\w+)", spec)
            key = f"`{m.group(1)}` with `--residual {m.group(2)}`" if m else f"`{spec}`"
            rows[key] = c[1:]
    return rows


def table_rows_from_results(results_md, header):
    """{mixer spec column: cells} of the MAD table in results.md headed by header."""
    rows, inside = {}, False
    for line in Path(results_md).read_text().splitlines():
        if line.startswith(header):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            c = cells(line)
            if set(c[0]) <= {"-"}:
                continue
            rows[c[1]] = c[2:]
    return rows


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    header = sys.argv[3] if len(sys.argv) == 4 else "| row | mixer spec |"
    records = table_rows_from_records(sys.argv[2])
    quoted = table_rows_from_results(sys.argv[1], header)
    problems = []
    if not quoted:
        problems.append(f"results.md has no MAD table headed '{header}'")
    for spec, expected in records.items():
        if spec not in quoted:
            problems.append(f"{spec}: in the records' table, missing from results.md")
        elif quoted[spec] != expected or len(expected) != TASK_COLUMNS:
            problems.append(f"{spec}: results.md has {quoted[spec]}, the records give {expected}")
    for spec in quoted.keys() - records.keys():
        problems.append(f"{spec}: in results.md, but no kept record backs it")
    for p in problems:
        print("mad_table_in_results:", p)
    if problems:
        sys.exit(1)
    print(f"mad_table_in_results: all {len(records)} rows of results.md's MAD table match the kept records")


if __name__ == "__main__":
    main()
