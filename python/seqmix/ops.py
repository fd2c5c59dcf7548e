"""Typed wrappers of torch.ops.seqmix.* (generated from the operators' schemas and docs into _op_wrappers.py by
scripts/generate_op_wrappers.py; hypermlp_read's mixing tuples and the helpers below are written here): the seqmix
ops with autograd (the fused kernels' hand-written backward, or ATen's for the naive twins). Tensors are float32 or float64, or bfloat16/float16 (computed in float32, returned
in the input's dtype; decode states keep theirs), on the CPU or a CUDA GPU, all of one call on one device.
Shapes use B batch, T queries, S keys (T <= S: the queries are the last T positions), H heads, dk/dv key/value
width, C channels, N states. `impl` is "auto" (the default: the fastest implementation the inputs' device has),
"fused" (the CPU kernel), "naive" (the readable ATen twin the tests hold the others to, on every device), for
attention and FEM's softmax read "torch" (PyTorch's own torch.nn.functional.scaled_dot_product_attention, with
seqmix's semantics), or for GLA and linear attention "chunked" (ATen matrix products in chunks, any device);
`seqmix.op_table()` lists each op's implementations per device.
"""
import json
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ._op_wrappers import *  # noqa: F401,F403  (one wrapper per operator, generated from its schema)
from ._op_wrappers import GENERATED, _seqmix_ops
from ._op_wrappers import hypermlp_read as _hypermlp_read_operator


# Written by hand: the operator's form with each mixing as one (diag, U, Vt) tuple, as the layers hold them.
def hypermlp_read(q: Tensor, k: Tensor, v: Tensor, s1: Optional[Tensor] = None,
                  mixing1: Optional[Tuple[Tensor, Tensor, Tensor]] = None, s2: Optional[Tensor] = None,
                  mixing2: Optional[Tuple[Tensor, Tensor, Tensor]] = None, activation: str = "relu",
                  layout: str = "lag", eps: float = 1e-12, scale: float = 1.0, block: int = 256,
                  impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tensor:
    d1, u1, vt1 = mixing1 if mixing1 is not None else (None, None, None)
    d2, u2, vt2 = mixing2 if mixing2 is not None else (None, None, None)
    return _hypermlp_read_operator(q, k, v, s1, d1, u1, vt1, s2, d2, u2, vt2, activation, layout, eps, scale, block,
                                   impl, cu_seqlens)


hypermlp_read.__doc__ = ("The operator hypermlp_read with each mixing given as one tuple: mixing1 = (diag1, U1, Vt1), "
                         "mixing2 = (diag2, U2, Vt2).\n\n" + _hypermlp_read_operator.__doc__)


def ssm_initial_state(batch: int, channels: int, states: int, dtype: Optional[torch.dtype] = None,
                      device: Optional[torch.device] = None) -> Tensor:
    """Empty selective-scan state h [B,C,N] (zeros)."""
    return torch.zeros(batch, channels, states, dtype=dtype or torch.float32, device=device)


def op_table() -> dict:
    """The op table (each op family's src/ops/<family>/declare.cpp): {"families": [{"name", "torch_ops": [{"name",
    "impls", "impls_on": {"cpu": [...], "cuda": [...]}, "auto_on": {"cpu": ..., "cuda": ...}, "fused_kernels":
    [{"name", "devices", "passed_on_gpu"}], "doc"}], "bench_cases"}]}; impls is empty for an operator without an `impl` argument,
    impls_on says which of them run on each device and auto_on which one "auto" picks there (fused, then torch,
    then chunked, then naive), fused_kernels are the kernel operators the fused form calls with the devices
    PyTorch's dispatcher has a kernel for (none: the fused form is ATen code and runs anywhere) and whether its GPU
    kernel has passed on a GPU (auto takes the fused form on a GPU only then), and doc is the
    operator's documentation (its wrapper's docstring)."""
    return json.loads(_seqmix_ops().op_table())


def op_impls(op: str) -> List[str]:
    """The implementations the operator `op` takes as `impl` (e.g. ["fused", "naive", "torch"] for attention)."""
    for family in op_table()["families"]:
        for entry in family["torch_ops"]:
            if entry["name"] == op:
                return entry["impls"]
    raise ValueError(f"seqmix: no operator '{op}' in the op table")


def read_safetensors_cpp(path: str):
    """The tensors of a safetensors file as read by seqmix's C++ reader: dict name -> tensor (file order)."""
    names, tensors = _seqmix_ops().read_safetensors(path)
    return dict(zip(names, tensors))


# The generated wrappers (every operator of the op table but op_table) and the functions written here.
__all__ = GENERATED + ["op_table", "op_impls", "ssm_initial_state", "read_safetensors_cpp"]
# Helpers written in Python (no operator behind them).
PYTHON_ONLY = ["ssm_initial_state", "op_impls"]
# Operators of the package, not of an op family (src/python/): the module operators are how torch.compile calls
# seqmix's modules (python/seqmix/_compile.py).
PACKAGE_OPS = ["read_safetensors", "registry", "build_info", "module_forward", "module_backward", "module_output_dtype"]
