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
# keep MARKER REQUIRED OPTIONAL: for every folder under SRC holding MARKER (checkpoints aside), copies its
# REQUIRED files (one missing is an error) and its OPTIONAL ones (when present) to the same path under DEST;
# sets `found` to the number of such folders.
keep() {
  local marker=$1 required=$2 optional=$3 file dir rel f
  found=0
  while IFS= read -r -d '' file; do
    dir=$(dirname "$file")
    rel=${dir#"$src"}
    rel=${rel#/}
    mkdir -p "$dest/$rel"
    for f in $required; do
      [ -f "$dir/$f" ] || { echo "keep_run_records: $dir has $marker but no $f" >&2; exit 1; }
      install -m 644 "$dir/$f" "$dest/$rel/$f"
    done
    for f in $optional; do
      if [ -f "$dir/$f" ]; then install -m 644 "$dir/$f" "$dest/$rel/$f"; fi
    done
    found=$((found + 1))
  done < <(find "$src" -name "$marker" -not -path '*/checkpoints/*' -print0 | sort -z)
}
keep summary.json "config.yaml metrics.jsonl summary.json" ""
kept=$found
keep seeds.json "seeds.json" "seeds.yaml"
tables=$found
for f in mad.md mad.json; do
  if [ -f "$src/$f" ]; then install -m 644 "$src/$f" "$dest/$f"; fi
done
echo "keep_run_records: $kept finished runs of $src kept in $dest"
[ "$tables" -eq 0 ] || echo "keep_run_records: and $tables seqmix train --seeds tables (seeds.json, seeds.yaml)"
