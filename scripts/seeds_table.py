#!/usr/bin/env python3
"""Prints one markdown table over the three-seed runs of several models (`seqmix train --seeds` folders).

Usage: seeds_table.py [--baseline DIR] DIR=LABEL ...
Each DIR holds seeds.json and seed-S/ run folders, as `seqmix train --seeds` writes them. One row per DIR,
sorted by the mean of the final primary metric (lower first for seqmix's loss-like metrics, loss and
mse/mae, as its tasks rank them; higher first otherwise): its parameter count, the mean over seeds of the metric at every evaluation, the final metric as
"mean ± sample std" (seqmix's own numbers from seeds.json), the other final metrics likewise, and each
seed's final value, in seed order (every table must have run the same seeds). With --baseline, a last column says whether the row's seeds and the baseline's are
separated: every seed's final value below every baseline seed's ("below"), above them all ("above"), or
neither ("overlap").
"""
import json
import sys
from pathlib import Path

LOWER_IS_BETTER = {"loss", "mse", "mae"}


def fail(message):
    print(f"seeds_table: {message}", file=sys.stderr)
    sys.exit(1)


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"cannot read {path}: {e}")


def load_table(folder):
    """seeds.json, the per-seed summaries and {step: [metric per seed]} of the evaluations."""
    table = read_json(Path(folder) / "seeds.json")
    if not isinstance(table, dict) or any(key not in table for key in ("seeds", "mean", "std", "runs")):
        fail(f"{Path(folder) / 'seeds.json'} is not a `seqmix train --seeds` table (it needs seeds, mean, std, runs)")
    summaries = [read_json(Path(folder) / f"seed-{s}" / "summary.json") for s in table["seeds"]]
    metric = summaries[0].get("metric") if isinstance(summaries[0], dict) else None
    if not metric or any(str(s) not in table["runs"] for s in table["seeds"]):
        fail(f"{folder}: seed-{table['seeds'][0]}/summary.json names no metric, or seeds.json lacks a seed's run")
    evals = {}
    for s in table["seeds"]:
        path = Path(folder) / f"seed-{s}" / "metrics.jsonl"
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            fail(f"cannot read {path}: {e}")
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}: line {number} is not JSON ({e})")
            if not isinstance(record, dict) or "step" not in record:
                fail(f"{path}: line {number} is not a metrics record (an object with a step)")
            if record.get("split") != "train" and metric in record:
                evals.setdefault(record["step"], []).append(record[metric])
    return table, summaries, metric, evals


def same_folder(a, b):
    return Path(a).resolve() == Path(b).resolve()


def main():
    args = sys.argv[1:]
    baseline = None
    if args and args[0].startswith("--baseline="):
        baseline, args = args[0].split("=", 1)[1], args[1:]
    elif len(args) >= 2 and args[0] == "--baseline":
        baseline, args = args[1], args[2:]
    for a in args:
        if a.startswith("-"):
            fail(f"'{a}': the only option is --baseline DIR, given first")
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    rows = []
    for arg in args:
        folder, label = arg.rsplit("=", 1) if Path(arg.rsplit("=", 1)[0]).is_dir() else arg.split("=", 1)
        rows.append((folder, label, *load_table(folder)))
    metric = rows[0][4]
    if any(r[4] != metric for r in rows):
        fail("the tables rank different metrics: " + ", ".join(f"{r[0]}: {r[4]}" for r in rows))
    if len({tuple(sorted(r[2]["seeds"])) for r in rows}) != 1:
        fail("the tables ran different seeds: " + ", ".join(f"{r[0]}: {r[2]['seeds']}" for r in rows))
    steps = sorted(set().union(*(r[5].keys() for r in rows)))
    others = sorted(set().union(*(r[2]["mean"].keys() for r in rows)) - {metric})
    lower = metric in LOWER_IS_BETTER
    rows.sort(key=lambda r: r[2]["mean"][metric] if lower else -r[2]["mean"][metric])
    base_values = None
    if baseline is not None:
        base = [r for r in rows if same_folder(r[0], baseline)]
        if not base:
            fail(f"--baseline {baseline} is not one of the tables' folders")
        base_values = list(base[0][2]["runs"][str(s)][metric] for s in base[0][2]["seeds"])

    seed_order = sorted(rows[0][2]["seeds"])
    seeds = ", ".join(str(s) for s in seed_order)
    header = [f"model (seeds {seeds})", "parameters"] + [f"step {s}" for s in steps]
    header += [f"final {metric}"] + [f"final {m}" for m in others] + [f"each seed's {metric}"]
    if baseline is not None:
        header.append("seeds vs the baseline")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for folder, label, table, summaries, _, evals in rows:
        params = sorted({s["parameters"] for s in summaries})
        cells = [label, " / ".join(f"{p:,}" for p in params)]
        for step in steps:
            values = evals.get(step, [])
            complete = len(values) == len(table["seeds"])
            cells.append(f"{sum(values) / len(values):.3f}" if complete else "-")
        for m in [metric] + others:
            cells.append(f"{table['mean'][m]:.4f} ± {table['std'][m]:.4f}" if m in table["mean"] else "-")
        values = [table["runs"][str(s)][metric] for s in seed_order]
        cells.append(", ".join(f"{v:.3f}" for v in values))
        if base_values is not None:
            if same_folder(folder, baseline):
                cells.append("(baseline)")
            elif max(values) < min(base_values):
                cells.append("below")
            elif min(values) > max(base_values):
                cells.append("above")
            else:
                cells.append("overlap")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
