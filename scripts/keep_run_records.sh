#!/usr/bin/env bash
# Copies the record of every finished run under SRC (a folder holding summary.json) to the same relative
# path under DEST: its config.yaml, metrics.jsonl and summary.json, never its checkpoints; and of every
# `seqmix train --seeds` table under SRC, its seeds.json (mean ± std) and seeds.yaml. docs/runs/ holds
# the records behind docs/results.md this way, so a table or plot can be rebuilt, and a MAD table continued,
# from a fresh clone (see docs/runs/README.md).
# Usage: scripts/keep_run_records.sh SRC DEST
set -euo pipefail
src=${1:?usage: scripts/keep_run_records.sh SRC DEST}
dest=${2:?usage: scripts/keep_run_records.sh SRC DEST}
[ -d "$src" ] || { echo "keep_run_records: $src is not a directory" >&2; exit 1; }
kept=0
while IFS= read -r -d '' summary; do
  run=$(dirname "$summary")
  rel=${run#"$src"}
  rel=${rel#/}
  mkdir -p "$dest/$rel"
  for f in config.yaml metrics.jsonl summary.json; do
    [ -f "$run/$f" ] || { echo "keep_run_records: $run has summary.json but no $f" >&2; exit 1; }
    install -m 644 "$run/$f" "$dest/$rel/$f"
  done
  kept=$((kept + 1))
done < <(find "$src" -name summary.json -not -path '*/checkpoints/*' -print0 | sort -z)
tables=0
while IFS= read -r -d '' table; do
  dir=$(dirname "$table")
  rel=${dir#"$src"}
  rel=${rel#/}
  mkdir -p "$dest/$rel"
  for f in seeds.json seeds.yaml; do
    if [ -f "$dir/$f" ]; then install -m 644 "$dir/$f" "$dest/$rel/$f"; fi
  done
  tables=$((tables + 1))
done < <(find "$src" -name seeds.json -not -path '*/checkpoints/*' -print0 | sort -z)
for f in mad.md mad.json; do
  if [ -f "$src/$f" ]; then install -m 644 "$src/$f" "$dest/$f"; fi
done
echo "keep_run_records: $kept finished runs of $src kept in $dest"
[ "$tables" -eq 0 ] || echo "keep_run_records: and $tables seqmix train --seeds tables (seeds.json, seeds.yaml)"
