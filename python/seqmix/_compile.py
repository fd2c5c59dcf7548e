"""seqmix's modules under torch.compile.

Dynamo cannot trace the methods of the TorchScript objects that hold the C++ modules, so while it traces, a bound
module is called through torch.ops.seqmix.module_forward (src/python/modules.cpp): one operator that Dynamo and
AOTAutograd put in the graph whole, with a Meta kernel that gives the output's shape (symbolic sizes, so a new
sequence length need not recompile). Its backward, module_backward, runs the C++ forward again with autograd on and
differentiates it, as activation checkpointing does: from the random state the forward began from (dropout draws
the same masks) and under the autocast the forward had. Both operators take the parameters and buffers the module
holds when it is called and bind them into the C++ module (as eager calls do, _binding.py). Eager calls keep the C++
layers' own graph instead of recomputing.
"""
import torch

PLAIN, MASKED, PACKED = 0, 1, 2  # the forms of ModuleForm in src/python/modules.cpp
_registered = False


def _setup_context(ctx, inputs, output):
    handle, x, extra, form, parameters, buffers, dtype, autocast = inputs
    ctx.call = (handle, form, dtype, autocast, extra is not None, len(parameters))
    saved = [x, output[2]] + ([extra] if extra is not None else []) + list(parameters) + list(buffers)
    ctx.save_for_backward(*saved)


def _backward(ctx, grad_outputs, grad_auxiliary_loss, _grad_random_state):
    handle, form, dtype, autocast, has_extra, count = ctx.call
    saved = ctx.saved_tensors
    x, random_state = saved[0], saved[1]
    extra = saved[2] if has_extra else None
    tensors = list(saved[3:] if has_extra else saved[2:])
    parameters, buffers = tensors[:count], tensors[count:]
    grad_x, grad_parameters = torch.ops.seqmix.module_backward(
        handle, x, extra, form, parameters, buffers, dtype, autocast, random_state, grad_outputs, grad_auxiliary_loss)
    return (None, (grad_x if x.is_floating_point() else None), None, None, list(grad_parameters), [None] * len(buffers),
            None, None)


def register():
    """Registers module_backward as module_forward's autograd (once, after the library is loaded)."""
    global _registered
    if not _registered:
        torch.library.register_autograd("seqmix::module_forward", _backward, setup_context=_setup_context)
        _registered = True


def _output_dtype(handle, inputs_dtype, autocast, parameters_dtype):
    """The dtype the C++ forward returns for inputs of this dtype under this autocast with parameters of this dtype:
    one sample through it, once per combination, run while Dynamo traces (outside its fake tensors) and put in the
    graph as a constant."""
    return torch.ops.seqmix.module_output_dtype(handle, inputs_dtype, autocast, parameters_dtype)


# What torch.compiler.assume_constant_result(_output_dtype) does (torch/_dynamo/decorators.py), without importing
# Dynamo, which would add 2.4 s to `import seqmix` here; test_module_compile.py fails if Dynamo stops reading it.
_output_dtype._dynamo_marked_constant = True


def call(module, inputs, extra, form):
    """(outputs, auxiliary loss) of a bound module by the module operators; what the traced graph holds."""
    device = inputs.device.type
    autocast = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    parameters, buffers = module._slots.resolve()
    floating = [p.dtype for p in parameters if p.is_floating_point()]
    dtype = _output_dtype(module._handle, inputs.dtype, autocast, floating[0] if floating else torch.float32)
    outputs, auxiliary_loss, _ = torch.ops.seqmix.module_forward(
        module._handle, inputs, extra, form, parameters, buffers, dtype, autocast)
    return outputs, auxiliary_loss
