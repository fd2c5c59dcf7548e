"""Finds libseqmix_ops.so and registers its operators (torch.ops.seqmix.*) with PyTorch."""
import json
import os
import re

import torch

_NAME = "libseqmix_ops.so"
_loaded_path = None


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("SEQMIX_OPS_LIBRARY"):
        yield os.environ["SEQMIX_OPS_LIBRARY"]
        return
    yield os.path.join(here, _NAME)  # installed next to the package
    yield os.path.join(here, "..", "..", "build", _NAME)  # this checkout's build/ (scripts/setup.sh builds it)


def library_path():
    """The path of the libseqmix_ops.so this package loaded."""
    return _loaded_path


def load_library():
    """Loads libseqmix_ops.so once: $SEQMIX_OPS_LIBRARY, else next to this package, else the checkout's build/.

    The library must be built against the LibTorch of the running torch: the project's .venv/ torch for the
    build scripts/setup.sh makes (docs/python.md says how to build against another torch 2.x)."""
    global _loaded_path
    if _loaded_path is not None:
        return _loaded_path
    tried = []
    for path in _candidates():
        path = os.path.normpath(path)
        tried.append(path)
        if os.path.isfile(path):
            try:
                torch.ops.load_library(path)
            except OSError as error:
                raise ImportError(
                    f"seqmix: cannot load {path}: {error} (was it built against this torch, {torch.__version__}?)"
                ) from error
            _loaded_path = path
            return path
    raise ImportError(
        "seqmix: libseqmix_ops.so not found (looked at " + ", ".join(tried) + "); build it with "
        "`cmake --build build --target seqmix_ops` or set SEQMIX_OPS_LIBRARY to its path"
    )


def build_info():
    """What the loaded library holds: {"version": the project's version, "runs": whether it loads `seqmix train`
    runs and writes weights files (the checkout's build does; the pip package holds the ops, layers and models)}."""
    load_library()
    return json.loads(torch.ops.seqmix.build_info())


def project_version():
    """The project's version (CMakeLists.txt's project()): the wheel's, written at build time, else the checkout's."""
    try:
        from ._version import __version__
        return __version__
    except ImportError:
        pass
    cmake_lists = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "CMakeLists.txt")
    try:
        with open(cmake_lists) as f:
            found = re.search(r"project\(seqmix VERSION ([0-9.]+)", f.read())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        return build_info()["version"]
    except ImportError:  # no library: the checkpoint reader still works, and says the version it cannot know
        return "unknown"
