#!/usr/bin/env bash
# The layout docs/contributing.md promises, checked: every op family folder src/ops/<family>/ (common aside) has its
# declaration, bad calls, naive twin and derivation, and its public header include/seqmix/ops/<family>.h; every
# prior file src/layers/priors/<prior>.cpp that declares <prior>_prior() is in the list of priors, and every listed
# prior has its file.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
for dir in src/ops/*/; do
  family=$(basename "$dir")
  [ "$family" = common ] && continue
  for file in declare.cpp bad_calls.cpp naive.cpp README.md; do
    [ -f "$dir$file" ] || missing+=("src/ops/$family/$file")
  done
  [ -f "include/seqmix/ops/$family.h" ] || missing+=("include/seqmix/ops/$family.h")
done
listed=$(sed -n 's/^ *X(\([a-z_0-9]*\)).*/\1/p' src/layers/priors/priors.cpp)
for file in src/layers/priors/*.cpp; do
  prior=$(basename "$file" .cpp)
  if grep -q "^PriorDeclaration ${prior}_prior()" "$file" && ! grep -qx "$prior" <<<"$listed"; then
    missing+=("X($prior) in src/layers/priors/priors.cpp")
  fi
done
for prior in $listed; do
  [ -f "src/layers/priors/$prior.cpp" ] || missing+=("src/layers/priors/$prior.cpp (listed in priors.cpp)")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "the layout docs/contributing.md describes lacks:"
  printf '  %s\n' "${missing[@]}"
  exit 1
fi
echo "every op family and prior has the files docs/contributing.md names"
