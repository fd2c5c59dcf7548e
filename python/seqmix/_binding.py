"""How a call of a seqmix module reaches its C++ module: the tensors the Python module holds *when it is called* are
what the C++ layers read and what autograd differentiates.

A seqmix module's C++ module has one slot per parameter and buffer (src/python/modules.cpp, Slot). Each call
resolves the tensors the Python module holds under those names at that moment — its own Parameters, FSDP2's unsharded
parameters, a parametrization's computed tensor, torch.func.functional_call's dictionary, a Parameter assigned by
load_state_dict(assign=True) or by hand — and binds them into the slots (the slot's TensorImpl takes the tensor's
storage, dtype and device: no copy). A DTensor is gathered whole first (full_tensor(), differentiable); any other
tensor subclass is a one-line error naming the parameter.

Without gradients the C++ forward simply runs on the bound slots. With them, the forward runs inside an
autograd.Function (BoundCall) that records the C++ layers' own graph from the slots, and its backward differentiates
that graph with respect to the slots and hands the gradients to the tensors that were bound: the backward costs what
the C++ layers' backward costs, nothing is recomputed (torch.compile's module operators, _compile.py, do recompute).
"""
import threading
from typing import List, Optional, Tuple

import torch
from torch import Tensor

_PLAIN = (Tensor, torch.nn.Parameter)
_handoff = threading.local()  # BoundCall.forward -> setup_context: the inner graph of the call just made


def _gathered(name: str, t: Tensor) -> Tensor:
    """t as a plain tensor the C++ layers can read: a DTensor gathered whole; a plain tensor as it is."""
    if type(t) in _PLAIN:
        return t
    if torch.distributed.is_available():
        from torch.distributed.tensor import DTensor
        if isinstance(t, DTensor):
            return t.full_tensor()  # an all-gather, differentiable: its gradient is sharded back
    if isinstance(t, Tensor):
        return t  # functorch's wrapped tensors and other subclasses: the C++ binding names what it cannot read
    raise TypeError(f"seqmix module: '{name}' is a {type(t).__name__}, not a tensor")


class Slots:
    """Where each slot's tensor lives in a Python module: (owner module, attribute) per parameter and buffer of the C++
    module, in the order its bind() takes them."""

    def __init__(self, module: torch.nn.Module, bound):
        parameter_names, buffer_names = bound.slot_names()
        self.parameter_names, self.buffer_names = tuple(parameter_names), tuple(buffer_names)
        self.parameters = [_owner_and_leaf(module, n) for n in parameter_names]
        self.buffers = [_owner_and_leaf(module, n) for n in buffer_names]

    def resolve(self) -> Tuple[List[Tensor], List[Tensor]]:
        """(parameters, buffers) the module holds now, in slot order."""
        parameters = [_gathered(n, getattr(o, leaf)) for n, (o, leaf) in zip(self.parameter_names, self.parameters)]
        buffers = [_gathered(n, getattr(o, leaf)) for n, (o, leaf) in zip(self.buffer_names, self.buffers)]
        return parameters, buffers


def _owner_and_leaf(module: torch.nn.Module, name: str):
    *path, leaf = name.split(".")
    for part in path:
        module = module._modules[part]
    return module, leaf


class BoundCall(torch.autograd.Function):
    """One forward of a bound module with gradients: (outputs, auxiliary loss []) of
    forward(module, form, wants, buffers, inputs, extra, *parameters). wants: which of (inputs, *parameters) get
    gradients; buffers: a list (they get none)."""

    @staticmethod
    def forward(module, form, wants, buffers, inputs, extra, *parameters):
        bound = module._bound
        bound.bind(list(parameters), buffers, module._what)
        own = module._own_parameters
        with torch.enable_grad():
            x = inputs.detach().requires_grad_(wants[0])
            for slot, want in zip(own, wants[1:]):
                slot.requires_grad_(want)
            outputs = module._forward_form(x, extra, form)
            auxiliary_loss = bound.auxiliary_loss() if module._adds_auxiliary_loss else None
        if auxiliary_loss is None:  # a placeholder output: the module adds no loss
            auxiliary_loss = torch.zeros((), dtype=torch.float32, device=inputs.device)
        # setup_context picks the inner graph up (under torch.func.grad it runs on another ctx than forward's
        # caller would have, so the graph travels beside the call, not in a ctx attribute set here).
        _handoff.inner = (outputs, auxiliary_loss, x, parameters, buffers)
        return outputs.detach(), auxiliary_loss.detach()

    @staticmethod
    def setup_context(ctx, inputs, output):
        module, _, wants = inputs[:3]
        ctx.module, ctx.wants, ctx.inner = module, wants, _handoff.inner
        ctx.save_for_backward(*inputs[6:])  # the bound tensors: their version counters guard against in-place edits

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_auxiliary_loss):
        outputs, auxiliary_loss, x, parameters, buffers = ctx.inner
        ctx.saved_tensors  # raises if a bound tensor was modified in place since the forward
        module, wants = ctx.module, ctx.wants
        module._bound.bind(list(parameters), buffers, module._what)  # another call may have bound others since
        own = module._own_parameters
        wrt = ([x] if wants[0] else []) + [slot for slot, want in zip(own, wants[1:]) if want]
        roots, seeds = [], []
        for root, seed in ((outputs, grad_outputs), (auxiliary_loss, grad_auxiliary_loss)):
            if root.requires_grad:
                roots.append(root)
                seeds.append(seed)
        keep = torch._C._autograd._get_current_graph_task_keep_graph()  # backward(retain_graph=True): again later
        grads = (list(torch.autograd.grad(roots, wrt, seeds, retain_graph=keep, allow_unused=True)) if roots
                 else [None] * len(wrt))
        # Every wanted input gets a gradient (zeros where the forward did not use it: DDP waits for each one).
        filled = iter(torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt))
        grad_inputs = next(filled) if wants[0] else None
        grad_parameters = [next(filled) if want else None for want in wants[1:]]
        if not keep:
            ctx.inner = None  # the C++ layers' graph is spent: free its tensors now, as autograd frees its own
        return (None, None, None, None, grad_inputs, None, *grad_parameters)


def call(module, inputs: Tensor, extra: Optional[Tensor], form: int) -> Tuple[Tensor, Optional[Tensor]]:
    """(outputs, auxiliary loss or None) of module's forward in `form` on the tensors it holds now (eager)."""
    parameters, buffers = module._slots.resolve()
    wants = (inputs.requires_grad and inputs.is_floating_point(),) + tuple(p.requires_grad for p in parameters)
    if torch.is_grad_enabled() and any(wants):
        outputs, auxiliary_loss = BoundCall.apply(module, form, wants, buffers, inputs, extra, *parameters)
        return outputs, (auxiliary_loss if module._adds_auxiliary_loss else None)
    module._bound.bind(parameters, buffers, module._what)
    with torch.no_grad():  # nothing wants a gradient: the C++ layers record no graph on their slots
        outputs = module._forward_form(inputs, extra, form)
        return outputs, (module._bound.auxiliary_loss() if module._adds_auxiliary_loss else None)


def bound_now(module):
    """The module's C++ module bound to the tensors it holds now, for calls that compute no gradients (decoding,
    generating, writing weights): their outputs do not require grad."""
    parameters, buffers = module._slots.resolve()
    module._bound.bind(parameters, buffers, module._what)
    return module._bound
