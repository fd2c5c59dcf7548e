# The dependencies of seqmix, in one place: sourced by scripts/setup.sh (which installs them) and
# scripts/test.sh (which installs them only when something is missing).
#   Debian packages: the compiler, build tools and every C++ library but LibTorch;
#   .venv/: PyPI's torch (LibTorch for C++ and Python) and the Python test packages, pinned exactly in
#           python/requirements.txt.

SEQMIX_DEBIAN_PACKAGES=(
  cmake g++ make pkg-config git ccache
  python3 python3-venv                 # the interpreter the project's .venv is made from
  python3-dev                          # Python.h: torch.compile's inductor compiles its C++ kernels against it
  libgloo-dev                          # Gloo's headers for c10d's ProcessGroupGloo (torch links its own Gloo)
  libgtest-dev libbenchmark-dev        # tests and benchmarks
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libsentencepiece-dev
  libssl-dev                           # OpenSSL's libcrypto: the SHA-256 of checkpoint files
  zlib1g-dev                           # gzip: the IDX files of Fashion-MNIST
  dataset-fashion-mnist                # Fashion-MNIST (70,000 labelled 28x28 images), the fashion_mnist task's data
  gnuplot-nox
)
SEQMIX_VENV=.venv
SEQMIX_REQUIREMENTS=python/requirements.txt
# Written into the venv after a successful install: the requirements it was installed from.
SEQMIX_VENV_STAMP=$SEQMIX_VENV/seqmix-requirements.txt

# The Debian packages that are not installed yet, one per line.
missing_debian_packages() {
  local p
  for p in "${SEQMIX_DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# Whether .venv holds exactly what python/requirements.txt pins (it was installed from this file).
venv_is_current() {
  [ -x "$SEQMIX_VENV/bin/python" ] && [ -f "$SEQMIX_VENV_STAMP" ] && cmp -s "$SEQMIX_REQUIREMENTS" "$SEQMIX_VENV_STAMP"
}

dependencies_installed() {
  [ -z "$(missing_debian_packages)" ] && venv_is_current
}
