#!/usr/bin/env bash
# The ahead-of-time Triton pipeline checked without a GPU: scripts/triton_aot.py compiles every launch configuration
# of the kernel modules for sm_80 and sm_90 into a C++ table (twice, once with two processes: identical files); the
# generated source and src/ops/common/triton_launch.cpp compile (C++17) and link with tests/ops/triton_aot_check.cpp,
# whose copy of the table equals the tool's manifest, which equals launch_configs() and signature() of the modules
# (tests/ops/triton_aot_check.py, with each cubin's registers and shared memory); arguments that differ from a
# kernel's are one-line errors; a kernel that fails to compile is one line and leaves the outputs as they were; and
# without libcuda.so.1 the launcher says so in one line. Triton's cache makes the compiles after the first quick.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${SEQMIX_PYTHON:-.venv/bin/python}
cxx=${CXX:-g++}
modules=(src/ops/fem/fem_softmax_read_triton.py src/ops/gla/gla_triton.py)
archs=(--arch 80 --arch 90)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "triton_aot_check: $*"; exit 1; }

aot() {  # aot DIR [options]: the tool's three outputs in DIR
  local dir=$1
  shift
  "$python" scripts/triton_aot.py "${modules[@]}" "${archs[@]}" --out "$dir/triton_kernels.cpp" \
    --header "$dir/triton_kernels.h" --manifest "$dir/triton_kernels.json" "$@" >/dev/null
}
aot "$tmp/a"
aot "$tmp/b" --jobs 2
for file in triton_kernels.cpp triton_kernels.h triton_kernels.json; do
  cmp -s "$tmp/a/$file" "$tmp/b/$file" || fail "two runs of scripts/triton_aot.py wrote different $file"
done

# A kernel that does not compile: one line naming it, and the outputs of the last run untouched.
cat >"$tmp/broken_triton.py" <<'EOF'
import torch
import triton
import triton.language as tl
from triton.compiler import ASTSource


@triton.jit
def broken_kernel(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, undefined_name, mask=offs < n)  # noqa: F821


def launch_configs():
    return [(broken_kernel, torch.float32, {"BLOCK": 16}, 4, 1, 80)]


def ast_source(kernel, dtype, constexprs):
    return ASTSource(fn=kernel, signature={"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs=constexprs)
EOF
cp "$tmp/a/triton_kernels.cpp" "$tmp/before.cpp"
if "$python" scripts/triton_aot.py "$tmp/broken_triton.py" --arch 80 --out "$tmp/a/triton_kernels.cpp" \
  --header "$tmp/a/triton_kernels.h" >"$tmp/broken.out" 2>"$tmp/broken.err"; then
  fail "a kernel that does not compile passed"
fi
[ "$(wc -l <"$tmp/broken.err")" -eq 1 ] || fail "a compile failure printed more than one line: $(cat "$tmp/broken.err")"
grep -q "^scripts/triton_aot.py: broken_kernel float32 sm_80 BLOCK=16 failed to compile: .*undefined_name" \
  "$tmp/broken.err" || fail "a compile failure's line does not name the kernel and cause: $(cat "$tmp/broken.err")"
cmp -s "$tmp/a/triton_kernels.cpp" "$tmp/before.cpp" || fail "a failed run changed its output"
ls "$tmp/a" | grep -q '\.tmp$' && fail "a failed run left a temporary file"

# The C++ side: the launcher at C++17 with every warning, the generated table, and the check program.
"$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Werror -Iinclude src/ops/common/triton_launch.cpp
"$cxx" -std=c++17 -c -O0 -Wall -Werror -Isrc/ops/common -I"$tmp/a" "$tmp/a/triton_kernels.cpp" -o "$tmp/kernels.o"
"$cxx" -std=c++17 -O1 -Wall -Wextra -Werror -Iinclude -Isrc/ops/common -I"$tmp/a" tests/ops/triton_aot_check.cpp \
  src/ops/common/triton_launch.cpp "$tmp/kernels.o" -ldl -o "$tmp/check"

mkdir "$tmp/cubins"
"$tmp/check" table "$tmp/cubins" >"$tmp/table.jsonl"
"$python" tests/ops/triton_aot_check.py "${modules[@]}" "${archs[@]}" --manifest "$tmp/a/triton_kernels.json" \
  --table "$tmp/table.jsonl" --cubins "$tmp/cubins"
"$tmp/check" args

driver=$("$tmp/check" driver)
if "$python" -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2>/dev/null; then
  echo "a CUDA driver is installed: $driver"
else
  case "$driver" in
    "error: no CUDA driver (libcuda.so.1) could be loaded, which seqmix's GPU kernels need: "*) ;;
    *) fail "without a driver the launcher said: $driver" ;;
  esac
  [ "$(wc -l <<<"$driver")" -eq 1 ] || fail "without a driver the launcher's error is not one line: $driver"
  echo "without a driver: ${driver#error: }"
fi
echo "the Triton kernels compile ahead of time into a table the C++ launcher agrees with"
