#!/usr/bin/env bash
# The GPU check (docs/gpu.md): on a Linux machine with an NVIDIA GPU, CUDA's compiler, CMake, ninja and a CUDA build
# of torch 2.x in its python3 (with the Triton it requires), and nothing else of seqmix's (no Debian packages, no
# network), it builds the Python package's library against that torch (the Triton kernels compiled ahead of time
# for the build's architectures), runs the cuda tests (every GPU kernel against the CPU's float64 naive twin) and the
# device tests, and prints the GPU benchmark table with the kernels' targets. Everything it needs beyond that machine comes with the repository (third_party/wheels: nlohmann_json's
# headers, as PyPI ships them).
#   scripts/gpu_check.sh [--quick]        PYTHON=python3, OUT=folder for the logs (default /tmp/seqmix-gpu-check)
# Exit status: 0 when the build, every test and the benchmark ran and passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=$(command -v "${PYTHON:-python3}")
out=${OUT:-/tmp/seqmix-gpu-check}
quick=()
[ "${1:-}" = "--quick" ] && quick=(--quick)
mkdir -p "$out"
start=$(date +%s)
say() { echo "[gpu_check $(($(date +%s) - start)) s] $*"; }

say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
"$python" - <<'PY'
import torch
assert torch.cuda.is_available(), "gpu_check: torch sees no GPU (torch.cuda.is_available() is False)"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}, "
      f"compute capability {'.'.join(map(str, torch.cuda.get_device_capability()))}")
PY

# nlohmann_json's headers from the wheel the repository carries, on a path of this script's own; and
# flash-linear-attention (fla-core, pure Python and Triton, with einops) for the benchmark's GLA baseline.
site=$out/site
"$python" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check --upgrade \
  --target "$site" "$root"/third_party/wheels/nlohmann_json-*.whl
"$python" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check --upgrade \
  --target "$site" "$root"/third_party/wheels/einops-*.whl "$root"/third_party/wheels/fla_core-*.whl ||
  say "fla-core not installed: the GLA rows run without flash-linear-attention's baseline"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

# The package's library (ops, layers, models: what the tests load), built against this machine's torch.
build=$out/build
say "configuring (log: $out/configure.log)"
cmake -S "$root" -B "$build" -G Ninja -DSEQMIX_PACKAGE_ONLY=ON -DSEQMIX_PYTHON="$python" \
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep -E "seqmix: (LibTorch|CUDA)" "$out/configure.log" || true
say "building with $(nproc) jobs (log: $out/build.log)"
cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
say "built $(ls "$build"/libseqmix_ops.so)"

# The tests: the cuda suite (every op, mixer and a few training steps on the GPU against the CPU) and the device
# suite (implementations per device, one-device rule), with pytest; -rs prints why anything skipped.
export SEQMIX_OPS_LIBRARY=$build/libseqmix_ops.so
export PYTHONPATH="$root/python:$root/python/reference:$PYTHONPATH"
say "tests (log: $out/tests.log)"
status=0
(cd "$root/python/tests" && "$python" -m pytest -q -rs -p no:cacheprovider test_cuda.py test_devices.py) \
  > "$out/tests.log" 2>&1 || status=$?
grep -E "passed|failed|error" "$out/tests.log" | tail -3
if [ "$status" -ne 0 ]; then
  grep -E "^(FAILED|ERROR)|Error:|assert" "$out/tests.log" | head -40
fi

say "benchmark (bench/gpu_bench.py; rows also in $out/bench.json)"
"$python" "$root/bench/gpu_bench.py" "${quick[@]}" --json "$out/bench.json" || status=$?
say "done, status $status"
exit "$status"
