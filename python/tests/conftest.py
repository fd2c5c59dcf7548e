"""pytest's view of these unittest suites (ctest runs them with unittest): the marker `cuda` selects the GPU tests,
`pytest -m cuda python/tests` (scripts/gpu_check.sh)."""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (test_cuda.py; skipped without one)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.fspath.basename == "test_cuda.py":
            item.add_marker(pytest.mark.cuda)
