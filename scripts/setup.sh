#!/usr/bin/env bash
# Installs every dependency of seqmix — Debian packages (scripts/dependencies.sh) and the project's Python
# environment .venv/ with PyPI's torch and the test packages (python/requirements.txt, exact pins) — then
# configures and builds seqmix in build/ against the venv's LibTorch.
# Idempotent: installed packages are kept, the venv is reinstalled only when the requirements change, the
# build is incremental. Prints what it did.
#   scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dependencies.sh

build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    *) echo "setup: unknown option '$a' (valid: --no-build)" >&2; exit 2 ;;
  esac
done

mapfile -t missing < <(missing_debian_packages)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
      echo "setup: not root and no sudo: cannot install ${missing[*]}" >&2; exit 1; fi
  fi
  echo "setup: apt-get update"
  "${SUDO[@]}" apt-get update -qq
  echo "setup: installing ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#SEQMIX_DEBIAN_PACKAGES[@]} Debian packages already installed"
fi

if venv_is_current; then
  echo "setup: $SEQMIX_VENV already holds $SEQMIX_REQUIREMENTS"
else
  # Debian's interpreter, so the venv is the same on every Debian 12 machine whatever else is on PATH.
  [ -x "$SEQMIX_VENV/bin/python" ] || { echo "setup: creating $SEQMIX_VENV"; /usr/bin/python3 -m venv "$SEQMIX_VENV"; }
  echo "setup: installing $SEQMIX_REQUIREMENTS into $SEQMIX_VENV (PyPI's torch with its CUDA wheels: several GB)"
  rm -f "$SEQMIX_VENV_STAMP"
  "$SEQMIX_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$SEQMIX_REQUIREMENTS"
  cp "$SEQMIX_REQUIREMENTS" "$SEQMIX_VENV_STAMP"
fi

# The checkout's python/ on the venv's path (what an editable install does): `.venv/bin/python -c "import seqmix"`
# works from anywhere, and finds build/libseqmix_ops.so beside it.
site_packages=$("$SEQMIX_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/python" > "$site_packages/seqmix-checkout.pth"

[ "$build" = 1 ] || exit 0
jobs=$(nproc 2>/dev/null || echo 2)
echo "setup: configuring build/ (Release, LibTorch from $SEQMIX_VENV)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "setup: building with -j$jobs"
cmake --build build -j"$jobs"
echo "setup: done; try ./build/seqmix info"
