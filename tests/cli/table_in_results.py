#!/usr/bin/env python3
"""Checks that docs/results.md quotes a generated markdown table row for row.

Usage: table_in_results.py RESULTS_MD TABLE_FILE ROWS
TABLE_FILE is a script's markdown output (e.g. `scripts/three_seeds.sh OUT 1 lm_table` on the kept records):
its first line that starts with "|" is the header. results.md must hold a table with that exact header whose
rows are the file's rows, the same text in the same order, no row missing and none added; and the file must
have ROWS rows, so a table that lost a model does not pass as a match. Exits 1 naming each difference.
"""
import sys
from pathlib import Path


def table_after(lines, header):
    """The rows (separator excluded) of the first table in lines headed by header, or None."""
    for i, line in enumerate(lines):
        if line == header:
            rows = []
            for row in lines[i + 1:]:
                if not row.startswith("|"):
                    break
                rows.append(row)
            return [r for r in rows if not set(r) <= set("|-: ")]
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    generated = [l.rstrip() for l in Path(sys.argv[2]).read_text().splitlines() if l.startswith("|")]
    if not generated:
        sys.exit(f"table_in_results: {sys.argv[2]} holds no markdown table")
    header = generated[0]
    expected = table_after(generated, header)
    quoted = table_after([l.rstrip() for l in Path(sys.argv[1]).read_text().splitlines()], header)
    problems = []
    if len(expected) != int(sys.argv[3]):
        problems.append(f"the generated table has {len(expected)} rows, not {sys.argv[3]}")
    if quoted is None:
        problems.append(f"results.md has no table headed {header}")
    else:
        problems += [f"results.md lacks the row {r}" for r in expected if r not in quoted]
        problems += [f"results.md's row is not in the records: {r}" for r in quoted if r not in expected]
        if not problems and quoted != expected:
            problems.append("results.md has the rows in another order")
    for p in problems:
        print("table_in_results:", p)
    if problems:
        sys.exit(1)
    print(f"table_in_results: results.md quotes all {len(expected)} rows of the table headed {header}")


if __name__ == "__main__":
    main()
