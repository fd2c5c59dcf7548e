#!/usr/bin/env bash
# The GPU check (docs/gpu.md): on a Linux machine with an NVIDIA GPU, CUDA's compiler, CMake, ninja and a CUDA build
# of torch 2.x in its python3 (with the Triton it requires), and nothing else of seqmix's (no Debian packages, no
# network), it builds the Python package's library against that torch (the Triton kernels compiled ahead of time
# for the build's architectures), runs the cuda tests (every GPU kernel against the CPU's float64 naive twin) and the
# device tests, and prints the GPU benchmark table with the kernels' targets. Everything it needs beyond that machine comes with the repository (third_party/wheels: nlohmann_json's
# headers, as PyPI ships them).
#   scripts/gpu_check.sh [--quick] [--library PATH]
#     PYTHON=python3, OUT=folder for the logs (default /tmp/seqmix-gpu-check); --quick: small benchmark shapes;
#     --library PATH: test and time an already built libseqmix_ops.so (built against this machine's torch, e.g. on a
#     developer machine with the same torch, Triton and CUDA versions: docs/gpu.md) instead of building one here.
# The tests run in crash-isolating pytest-xdist workers where pytest-xdist is installed (a test that crashes its
# process is reported, and the others still run), else in one process.
# Exit status: 0 when the build, every test and the benchmark ran and passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=$(command -v "${PYTHON:-python3}")
out=${OUT:-/tmp/seqmix-gpu-check}
quick=()
library=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --library)
      [ $# -ge 2 ] || { echo "gpu_check: --library needs a path to libseqmix_ops.so" >&2; exit 2; }
      library=$(realpath -e "$2" 2> /dev/null) || { echo "gpu_check: --library $2 does not exist" >&2; exit 2; }
      shift 2 ;;
    *) echo "gpu_check: unknown option '$1' (options: --quick, --library PATH)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
start=$(date +%s)
say() { echo "[gpu_check $(($(date +%s) - start)) s] $*"; }

say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
"$python" - <<'PY'
import torch
assert torch.cuda.is_available(), "gpu_check: torch sees no GPU (torch.cuda.is_available() is False)"
try:
    import triton
    triton_version = f"Triton {triton.__version__}"
except ImportError:
    triton_version = "no Triton"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, {triton_version}) on {torch.cuda.get_device_name()}, "
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

# The package's library (ops, layers, models: what the tests load), built against this machine's torch, or the one
# --library names. Either way it must load the process's shared libstdc++ and hold no copy of its own
# (scripts/check_cxx_runtime.sh; cmake/torch.cmake says why).
if [ -z "$library" ]; then
  build=$out/build
  say "configuring (log: $out/configure.log)"
  cmake -S "$root" -B "$build" -G Ninja -DSEQMIX_PACKAGE_ONLY=ON -DSEQMIX_PYTHON="$python" \
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  grep -E "seqmix: (LibTorch|CUDA|C\+\+ runtime)" "$out/configure.log" || true
  say "building with $(nproc) jobs (log: $out/build.log)"
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
  library=$build/libseqmix_ops.so
  say "built $library"
else
  say "testing the library given: $library"
fi
runtime=0
"$root/scripts/check_cxx_runtime.sh" "$library" || runtime=$?
if [ "$runtime" -eq 2 ]; then
  say "the library's C++ runtime is not checked: this machine has no readelf and nm (binutils)"
elif [ "$runtime" -ne 0 ]; then
  exit 1
fi

# The tests: the cuda suite (every op, mixer and a few training steps on the GPU against the CPU) and the device
# suite (implementations per device, one-device rule), with pytest; -rs prints why anything skipped.
export SEQMIX_OPS_LIBRARY=$library
export PYTHONPATH="$root/python:$root/python/reference:$PYTHONPATH"
workers=()
if "$python" -c "import xdist" 2> /dev/null; then
  workers=(-p xdist -n "$(( $(nproc) < 8 ? $(nproc) : 8 ))")
fi
say "tests${workers[*]:+ in ${workers[3]} pytest-xdist workers} (log: $out/tests.log)"
status=0
(cd "$root/python/tests" && "$python" -m pytest -q -rs -p no:cacheprovider "${workers[@]}" test_cuda.py test_devices.py) \
  > "$out/tests.log" 2>&1 || status=$?
# (|| true: a crashed run prints no summary, and grep finding nothing must not end the script.)
grep -E "passed|failed|error" "$out/tests.log" | tail -3 || true
if [ "$status" -ne 0 ]; then
  say "tests failed (status $status):"
  grep -E "^(FAILED|ERROR)|SUBFAIL|Error:|assert|Fatal Python error|crashed while running" "$out/tests.log" | head -40 || true
fi

say "benchmark (bench/gpu_bench.py; rows also in $out/bench.json)"
"$python" "$root/bench/gpu_bench.py" "${quick[@]}" --json "$out/bench.json" || status=$?
say "done, status $status"
exit "$status"
