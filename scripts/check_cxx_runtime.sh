#!/usr/bin/env bash
# One C++ runtime per process (cmake/torch.cmake): a seqmix library must load the shared libstdc++.so.6 that
# LibTorch runs with and hold no copy of its own. A copy (a toolchain whose g++ links libstdc++.a) shares no locale
# with the process's iostreams, and the first number formatted into an error message crashes the process.
#   scripts/check_cxx_runtime.sh LIBRARY...      exit 0 when every library passes, 1 when one fails, 2 without binutils
set -uo pipefail
if ! command -v readelf > /dev/null || ! command -v nm > /dev/null; then
  echo "check_cxx_runtime: readelf and nm (binutils) are needed to read $*" >&2
  exit 2
fi
status=0
for library in "$@"; do
  if [ ! -f "$library" ]; then
    echo "check_cxx_runtime: $library does not exist" >&2
    status=1
  elif ! readelf -d "$library" | grep -q 'NEEDED.*\[libstdc++\.so\.6\]'; then
    echo "check_cxx_runtime: $library does not load the shared libstdc++.so.6 (it was linked with a static copy)" >&2
    status=1
  elif copies=$(nm -DC --defined-only "$library" | grep -c ' std::basic_ostream<'); [ "$copies" -gt 0 ]; then
    echo "check_cxx_runtime: $library defines $copies of libstdc++'s std::basic_ostream symbols (a static copy)" >&2
    status=1
  else
    echo "check_cxx_runtime: $library loads the shared libstdc++.so.6 and holds no copy"
  fi
done
exit $status
