"""seqmix from PyTorch: the seqmix ops as torch.ops.seqmix.* with autograd, every mixer, channel mixer and model
as a torch.nn.Module backed by its C++ module, trained runs (load_run), and seqmix checkpoints as tensors.

    import torch, seqmix
    q = k = v = torch.randn(2, 128, 4, 32, requires_grad=True)
    y = seqmix.attention(q, k, v)          # [2,128,4,32], fused kernel with its hand-written backward
    y.sum().backward()
    weights = seqmix.load_checkpoint("runs/recall")   # the latest checkpoint of a `seqmix train` run
    mixer = seqmix.Mixer("fem:prior=gla", dim=64)      # an nn.Module: x [B,T,64] -> [B,T,64]
    run = seqmix.load_run("runs/recall")              # run.model, run.tokenizer, run.generate, run.evaluate

Importing loads libseqmix_ops.so when it is found (docs/python.md says where it is looked for); without it
the checkpoint reader still works, and calling an op raises the ImportError that says where it looked.
"""
from ._library import build_info, library_path, load_library, project_version
from .checkpoint import CheckpointError, checkpoint_steps, load_checkpoint, model_state, read_safetensors
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _module_names
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _op_names
from .verify import Report, verify, verify_mixer

try:
    load_library()
except ImportError:
    pass  # the ops raise it when called

__version__ = project_version()

__all__ = ["build_info", "library_path", "load_library", "CheckpointError", "checkpoint_steps", "load_checkpoint",
           "model_state", "read_safetensors", "Report", "verify", "verify_mixer"] + list(_module_names) + list(_op_names)
