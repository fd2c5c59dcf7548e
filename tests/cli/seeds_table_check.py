#!/usr/bin/env python3
"""Checks scripts/seeds_table.py against the records it tabulates.

Usage: seeds_table_check.py SEEDS_TABLE_PY DIR_A DIR_B
DIR_A and DIR_B are two `seqmix train --seeds` folders of the same task. The table's rows must be sorted by
the final metric, quote seqmix's own "mean ± std" from seeds.json, give each seed's final value and the mean
over seeds at every evaluation step (recomputed here from metrics.jsonl), and say "below"/"above"/"overlap"
against the baseline as the seeds' ranges give it. Then hand-written tables of a loss (lower first) whose
seeds lie below, above and across the baseline's, and bad input, which must be one line on stderr and exit 1.
"""
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def check(condition, message):
    if not condition:
        print(f"seeds_table_check: {message}")
        sys.exit(1)


def main():
    script, a, b = sys.argv[1:4]
    out = run(script, "--baseline", a, f"{a}=row A", f"{b}=row B")
    check(out.returncode == 0, f"seeds_table.py failed: {out.stderr}")
    lines = out.stdout.splitlines()
    check(len(lines) == 4, f"expected a header, a rule and two rows, got {lines}")
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        check(len(cells) == len(header), f"row has {len(cells)} cells, the header {len(header)}: {line}")
        rows[cells[0]] = dict(zip(header, cells))

    tables = {name: json.loads((Path(d) / "seeds.json").read_text()) for name, d in (("row A", a), ("row B", b))}
    metric = json.loads((Path(a) / "seed-0" / "summary.json").read_text())["metric"]
    order = sorted(tables, key=lambda n: tables[n]["mean"][metric], reverse=metric not in ("loss", "mse", "mae"))
    check([l.split("|")[1].strip() for l in lines[2:]] == order, f"rows not sorted by the final {metric}")
    for name, folder in (("row A", a), ("row B", b)):
        t, row = tables[name], rows[name]
        want = f"{t['mean'][metric]:.4f} ± {t['std'][metric]:.4f}"
        check(row[f"final {metric}"] == want, f"{name}: final {metric} {row[f'final {metric}']}, seeds.json {want}")
        finals = ", ".join(f"{t['runs'][str(s)][metric]:.3f}" for s in t["seeds"])
        each = row[f"each seed's {metric}"]
        check(each == finals, f"{name}: each seed's {metric} {each}, seeds.json {finals}")
        evals = {}
        for s in t["seeds"]:
            for line in (Path(folder) / f"seed-{s}" / "metrics.jsonl").read_text().splitlines():
                r = json.loads(line)
                if r["split"] != "train":
                    evals.setdefault(r["step"], []).append(r[metric])
        check(evals, f"{name}: no evaluations in the records")
        for step, values in evals.items():
            want = f"{statistics.mean(values):.3f}"
            check(row[f"step {step}"] == want, f"{name}: step {step} {row[f'step {step}']}, the records' mean {want}")
    base = [tables["row A"]["runs"][str(s)][metric] for s in tables["row A"]["seeds"]]
    other = [tables["row B"]["runs"][str(s)][metric] for s in tables["row B"]["seeds"]]
    want = "below" if max(other) < min(base) else "above" if min(other) > max(base) else "overlap"
    check(rows["row A"]["seeds vs the baseline"] == "(baseline)", "the baseline row is not marked")
    check(rows["row B"]["seeds vs the baseline"] == want, f"row B vs the baseline: {rows['row B']['seeds vs the baseline']}, want {want}")

    missing = run(script, f"{a}/nowhere=row")
    check(missing.returncode == 1 and "cannot read" in missing.stderr and "nowhere/seeds.json" in missing.stderr
          and len(missing.stderr.splitlines()) == 1, f"a missing folder: {missing.returncode} {missing.stderr!r}")
    unlabelled = run(script, a)
    check(unlabelled.returncode != 0 and "Usage" in unlabelled.stderr, "a folder without =LABEL is not refused")
    unknown = run(script, "--baseline", "elsewhere", f"{a}=row A")
    check(unknown.returncode == 1 and "--baseline elsewhere is not one of the tables" in unknown.stderr,
          f"an unknown baseline: {unknown.stderr!r}")
    hand_written_tables(script)
    print(f"seeds_table_check: the table of {a} and {b} matches their records ({metric}, {len(evals)} evaluations)")


def write_table(folder, finals, metric="loss", seeds=(0, 1, 2)):
    """A --seeds folder whose seed s ends at finals[i] (one evaluation at step 10, half-way, at twice it)."""
    folder.mkdir(parents=True)
    mean = statistics.mean(finals)
    std = statistics.stdev(finals)
    runs = {str(s): {metric: v} for s, v in zip(seeds, finals)}
    (folder / "seeds.json").write_text(json.dumps({"seeds": list(seeds), "mean": {metric: mean},
                                                   "std": {metric: std}, "runs": runs}))
    for s, v in zip(seeds, finals):
        run = folder / f"seed-{s}"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps({"metric": metric, "parameters": 1000}))
        lines = [{"split": "train", "step": 10, metric: 9.0}, {"split": "test", "step": 10, metric: 2 * v},
                 {"split": "test", "step": 20, metric: v}]
        (run / "metrics.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))


def hand_written_tables(script):
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        write_table(t / "low", [1.0, 1.1, 1.2])
        write_table(t / "base", [2.0, 2.1, 2.2])
        write_table(t / "across", [1.5, 2.05, 2.15])  # between the baseline's lowest and highest
        write_table(t / "high", [3.2, 3.0, 3.1], seeds=(2, 0, 1))  # the same seeds, listed in another order
        out = run(script, "--baseline", f"{t}/base/", *(f"{t}/{n}={n}" for n in ("high", "base", "across", "low")))
        check(out.returncode == 0, f"hand-written tables: {out.stderr}")
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines()[2:]]
        check([r[0] for r in rows] == ["low", "across", "base", "high"], f"a loss is not sorted lowest first: {rows}")
        want = {"low": "below", "across": "overlap", "base": "(baseline)", "high": "above"}
        check(all(r[-1] == want[r[0]] for r in rows), f"the baseline column: {rows}")
        check(rows[3][-2] == "3.000, 3.100, 3.200", f"each seed's values are not in seed order: {rows[3]}")
        check(rows[0][2:4] == ["2.200", "1.100"], f"the mean curve of 'low' (train records left out): {rows[0]}")

        def refused(args, words):
            r = run(script, *args)
            check(r.returncode == 1 and words in r.stderr and len(r.stderr.splitlines()) == 1,
                  f"{args}: want one line naming '{words}', got {r.returncode} {r.stderr!r}")

        write_table(t / "accuracy", [0.5, 0.6, 0.7], metric="accuracy")
        refused([f"{t}/low=a", f"{t}/accuracy=b"], "rank different metrics")
        write_table(t / "two_seeds", [1.0, 1.1], seeds=(0, 1))
        refused([f"{t}/low=a", f"{t}/two_seeds=b"], "ran different seeds")
        with open(t / "low" / "seed-1" / "metrics.jsonl", "a") as f:
            f.write("{not json\n")
        refused([f"{t}/low=a"], "line 4 is not JSON")
        (t / "base" / "seeds.json").write_text("{}")
        refused([f"{t}/base=a"], "is not a `seqmix train --seeds` table")
        refused([f"{t}/high=a", "--baseline", f"{t}/high"], "the only option is --baseline DIR, given first")


if __name__ == "__main__":
    main()
