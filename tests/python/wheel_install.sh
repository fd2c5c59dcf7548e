#!/usr/bin/env bash
# The pip package as a researcher gets it (pyproject.toml): the wheel built against a given Python's torch with
# `pip wheel --no-build-isolation`, nlohmann_json's headers from PyPI (the system's are ignored), installed with
# `pip install --target` into a folder that is the only seqmix on the path, then used from outside the checkout:
# import (no PYTHONPATH to python/, no SEQMIX_OPS_LIBRARY), a mixer forward and backward, a `seqmix train` run
# loaded and its greedy continuation equal to `seqmix generate`'s, a model compiled fullgraph equal to eager.
#   tests/python/wheel_install.sh PYTHON SEQMIX_BINARY [MAIN_BUILD]
# With MAIN_BUILD, the wheel links that build's libseqmix_modules.a (SEQMIX_REUSE_BUILD: only the bindings compile,
# which keeps this test in the fast suite); without, it compiles the ops, layers and models too (the slow test).
set -euo pipefail
python=$1
binary=$2
main_build=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

reuse=()
[ -n "$main_build" ] && reuse=(--config-settings "cmake.define.SEQMIX_REUSE_BUILD=$main_build")
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$python" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check --quiet -w "$scratch/dist" \
  --config-settings "build-dir=$scratch/build" --config-settings cmake.define.CMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON "${reuse[@]}" "$root"
built=$(date +%s)
wheel=$(ls "$scratch"/dist/seqmix-*.whl)
"$python" -m pip install --no-deps --disable-pip-version-check --quiet --target "$scratch/site" "$wheel"
installed=$(date +%s)
echo "wheel $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB, built in $((built - start)) s, installed in $((installed - built)) s"
# Nothing but torch's libraries and the C/C++ runtime: none of the CLI's (YAML, OpenSSL, zlib, SentencePiece).
needed=$(readelf -d "$scratch/site/seqmix/libseqmix_ops.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "libseqmix_ops.so needs: $needed"
if echo "$needed" | grep -Eq "yaml|crypto|ssl|libz\.|sentencepiece|CLI"; then
  echo "the package's library needs a library of the CLI's" >&2
  exit 1
fi

# A text run trained by the checkout's program, and its greedy continuation.
awk 'BEGIN { for (i = 0; i < 400; i++) printf "line %d of a tiny corpus, said the %s.\n", i % 7, (i % 3 == 0 ? "cat" : i % 3 == 1 ? "dog" : "owl") }' \
  > "$scratch/corpus.txt"
"$binary" train --task "text:path=$scratch/corpus.txt,seq_len=32,vocab_size=300,num_test=4" --mixer softmax:heads=2 \
  --steps 3 --batch-size 4 --eval-every 3 --threads 1 --out "$scratch/run" > /dev/null
"$binary" generate --run "$scratch/run" --prompt "said the" --tokens 12 --temperature 0 > "$scratch/cli_generate.txt"

cd "$scratch"  # outside the checkout
env -u SEQMIX_OPS_LIBRARY PYTHONPATH="$scratch/site" SITE="$scratch/site" RUN="$scratch/run" \
  CLI_GENERATE="$scratch/cli_generate.txt" ROOT="$root" "$python" - <<'PY'
import os, re
import torch
import seqmix

site, root = os.environ["SITE"], os.environ["ROOT"]
assert seqmix.__file__.startswith(site), f"imported {seqmix.__file__}, not the installed package in {site}"
assert seqmix.library_path().startswith(site), seqmix.library_path()
version = re.search(r"project\(seqmix VERSION ([0-9.]+)", open(os.path.join(root, "CMakeLists.txt")).read()).group(1)
assert seqmix.__version__ == version, (seqmix.__version__, version)
assert seqmix.build_info() == {"version": version, "runs": False}, seqmix.build_info()

torch.manual_seed(0)
mixer = seqmix.Mixer("fem:prior=gla", dim=32, max_len=64)
x = torch.randn(2, 20, 32, requires_grad=True)
mixer(x).square().mean().backward()
assert x.grad is not None and torch.isfinite(x.grad).all() and all(p.grad is not None for p in mixer.parameters())

run = seqmix.load_run(os.environ["RUN"])
assert isinstance(run.model, seqmix.LanguageModel), type(run.model)
text = run.generate("said the", tokens=12, temperature=0)
cli = open(os.environ["CLI_GENERATE"]).read().rstrip("\n")
assert text == cli, f"package {text!r} != seqmix generate {cli!r}"
try:
    run.metrics()
    raise AssertionError("Run.metrics should need the run library")
except RuntimeError as error:
    assert "pip package" in str(error), error

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mixer = seqmix.Mixer("softmax:heads=2", dim=32, max_len=64)
        self.ffn = seqmix.ChannelMixer("swiglu", dim=32)

    def forward(self, x):
        return self.ffn(self.mixer(x))

net = Net()
eager = net(x.detach())
compiled = torch.compile(net, fullgraph=True, backend="aot_eager", dynamic=True)(x.detach())
torch.testing.assert_close(compiled, eager, atol=1e-6, rtol=1e-5)
print(f"seqmix {seqmix.__version__} from {os.path.dirname(seqmix.__file__)}: mixer forward and backward, "
      f"run loaded (greedy continuation = seqmix generate), fullgraph compile = eager")
PY
