"""seqmix's layers and models as torch.nn.Modules, backed by the C++ modules the CLI trains.

    mixer = seqmix.Mixer("fem:prior=softmax", dim=64, max_len=128)   # any spec `seqmix list` shows
    y = mixer(x)                                                      # x [B,T,64] -> [B,T,64]
    state = mixer.init_state(batch=B)                                 # causal mixers decode token by token
    y_t = mixer.step(x[:, t], state)

    model = seqmix.LanguageModel(vocab_size=256, mixers=["fem:prior=softmax"], dim=64, layers=2)
    run = seqmix.load_run("runs/shakespeare")                        # a `seqmix train` run, with its tokenizer
    print(run.generate("ROMEO:", tokens=100, temperature=0.8))

The Python module owns the weights: its parameters and buffers carry the C++ names ("q.weight",
"blocks.0.mixer.out.weight", ...) and each call binds the tensors it holds at that moment into the C++ module
(_binding.py), so whatever replaces them — an optimizer's in-place step, load_state_dict (assign=True too), .to(),
FSDP2's fully_shard, torch.nn.utils.parametrize, torch.func.functional_call, a Parameter assigned by hand — is what
the C++ forward reads and what autograd differentiates. The forward is the C++ forward (the same fused kernels), so
nothing is re-implemented here. Built under torch.device("meta"), a module holds meta tensors until
.to_empty(device=...) and reset_parameters(). Under torch.compile the forward is one operator of the graph
(_compile.py says how); modules pickle and copy (a new C++ module is built from the same arguments).
"""
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _binding, _compile, _text
from ._library import build_info, load_library
from .checkpoint import CheckpointError, checkpoint_steps, load_checkpoint, model_state

__all__ = ["Mixer", "ChannelMixer", "Model", "LanguageModel", "Run", "Tokenizer", "load_run", "registry",
           "save_weights"]


def _classes():
    load_library()
    _compile.register()
    return torch.classes.seqmix


def registry() -> Dict[str, list]:
    """Every registered component, as `seqmix list` shows them: {"mixers", "channel_mixers", "residuals",
    "models"}, each a list of {"name", "meaning", "options": [{"key", "type", "default", "meaning"} and, for a choice,
    "choices"]}."""
    load_library()
    return json.loads(torch.ops.seqmix.registry())


class _Holder(torch.nn.Module):
    """A level of the C++ module's tree (e.g. "blocks.0.mixer"): holds the tensors registered below it."""


class _Bound(torch.nn.Module):
    """An nn.Module around a C++ module: it holds a tensor per C++ parameter and buffer, under the C++ names, and every
    call binds the tensors it holds then into the C++ module (_binding.py)."""

    def __init__(self, bound):
        super().__init__()
        self._attach(bound)
        # Where the module is made: the CPU, or torch.device(...)'s device (meta: empty tensors, reset_parameters()
        # after to_empty() gives the values; the C++ module is built on the CPU all the same).
        device = torch.get_default_device()
        for table, (names, tensors) in (("parameter", bound.named_parameters()), ("buffer", bound.named_buffers())):
            for name, own in zip(names, tensors):
                data = (torch.empty_like(own, device=device) if device.type == "meta"
                        else own.detach().to(device))  # on the CPU: the C++ tensor's storage itself, no copy
                owner, leaf = self._owner(name), name.rsplit(".", 1)[-1]
                if table == "parameter":
                    owner.register_parameter(leaf, torch.nn.Parameter(data, requires_grad=own.requires_grad))
                else:
                    owner.register_buffer(leaf, data)
        self._slots = _binding.Slots(self, bound)
        self.train(bound.is_training())

    def _attach(self, bound):
        self._bound = bound
        self._handle = bound.handle()  # how a compiled graph names the C++ module (an int Dynamo can hold)
        self._own_parameters = bound.parameter_slots()  # the C++ layers' parameter tensors (_binding.py)
        self._adds_auxiliary_loss = bound.adds_auxiliary_loss()  # a mixture of experts inside
        self._last_auxiliary_loss = None

    @property
    def _what(self) -> str:
        """How errors name this module."""
        return f"seqmix.{type(self).__name__} '{self.spec.split(':')[0]}'"

    def _call(self, inputs: Tensor, extra: Optional[Tensor], form: int):
        """The forward in `form` on the tensors the module holds now: _binding.call eagerly, the module operators
        (_compile.py) while Dynamo traces."""
        if torch.compiler.is_compiling():
            outputs, auxiliary_loss = _compile.call(self, inputs, extra, form)
            self._last_auxiliary_loss = auxiliary_loss if self._adds_auxiliary_loss else None
            return outputs
        outputs, self._last_auxiliary_loss = _binding.call(self, inputs, extra, form)
        return outputs

    def _owner(self, name: str) -> torch.nn.Module:
        module = self
        for part in name.split(".")[:-1]:
            if part not in module._modules:
                module.add_module(part, _Holder())
            module = module._modules[part]
        return module

    def train(self, mode: bool = True):
        super().train(mode)
        self._bound.train(mode)
        return self

    @torch.no_grad()
    def reset_parameters(self, names: Optional[Sequence[str]] = None) -> None:
        """Gives every parameter and buffer (or those of `names`, state-dict names) the values a module built now
        would get (the same draws from torch's generator as building it: seed, then reset, equals seed, then build),
        in place, on the device and in the dtype each tensor has. After building under torch.device("meta") and
        .to_empty(device=...), this initialises the module; FSDP2's sharded parameters (DTensors) take their shards."""
        kind, arguments = self._construction()
        fresh = getattr(_classes(), kind)(*arguments)
        wanted = None if names is None else set(names)
        for table_names, tensors in (fresh.named_parameters(), fresh.named_buffers()):
            for name, value in zip(table_names, tensors):
                if wanted is not None:
                    if name not in wanted:
                        continue
                    wanted.discard(name)
                _copy_into(name, getattr(self._owner(name), name.rsplit(".", 1)[-1]), value)
        if wanted:
            raise KeyError(f"reset_parameters: no parameter or buffer named {sorted(wanted)[0]!r}")

    def extra_repr(self) -> str:
        return self._bound.describe()

    # Pickling and copying: the state is the nn.Module's (its tensors, training flag, a subclass's own attributes)
    # and how to build the C++ module again; unpickling builds a new C++ module of the same construction, which reads
    # the module's tensors at each call like any other.
    def _construction(self):
        raise NotImplementedError

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_bound", "_own_parameters"):
            state.pop(key)
        state["_last_auxiliary_loss"] = None
        state["_seqmix_construction"] = self._construction()
        return state

    def __setstate__(self, state):
        state = dict(state)
        kind, arguments = state.pop("_seqmix_construction")
        self.__dict__.update(state)
        self._attach(getattr(_classes(), kind)(*arguments))
        self._bound.train(self.training)


def _copy_into(name: str, target: Tensor, value: Tensor) -> None:
    """target.copy_(value) for reset_parameters; a DTensor takes its shard of value."""
    if target.device.type == "meta":
        raise RuntimeError(f"reset_parameters: '{name}' is on the meta device; give the module storage first "
                           "(.to_empty(device=...))")
    if type(target) not in (Tensor, torch.nn.Parameter) and torch.distributed.is_available():
        from torch.distributed.tensor import DTensor, distribute_tensor
        if isinstance(target, DTensor):
            value = distribute_tensor(value.to(target.device, target.dtype), target.device_mesh, target.placements)
    target.copy_(value)


class _AddsLoss:
    """Modules whose forward may add a training loss term (a mixture of experts' load balance)."""

    def auxiliary_loss(self) -> Optional[Tensor]:
        """The load-balance loss of the last forward (mixture of experts; float32 after a compiled forward), or None."""
        return self._last_auxiliary_loss


class _Decodes:
    """Token-by-token decoding of a causal mixer or an lm model: init_state(batch), then step(x_t, state) per
    position or prefill(x, state) for a block; the state is the C++ module's, advanced in place. Decoding reads the
    tensors the module holds at each call and computes no gradients (its outputs do not require grad)."""

    @torch.no_grad()
    def init_state(self, batch: int):
        return _binding.bound_now(self).init_state(batch)

    @torch.no_grad()
    def step(self, x_t: Tensor, state) -> Tensor:
        """Mixer: x_t [B,dim] -> [B,dim]. Model: tokens [B] -> logits [B,V] (or features [B,F] -> [B,O])."""
        return _binding.bound_now(self).step(x_t, state)

    @torch.no_grad()
    def prefill(self, x: Tensor, state) -> Tensor:
        return _binding.bound_now(self).prefill(x, state)


class Mixer(_Decodes, _Bound):
    """A sequence mixer by its spec, e.g. "softmax:heads=4", "fem:prior=gla", "hyperglu", "ela" (`seqmix list`).

    forward(x [B,T,dim]) -> [B,T,dim]. Causal mixers decode: init_state(batch), then step(x_t [B,dim], state)
    per token, or prefill(x [B,T,dim], state) for a block; steps after a prefill equal the forward.
    forward(x [1,N,dim], cu_seqlens=offsets) mixes packed sequences (int64 [S+1] offsets, flash-linear-attention's
    convention), each as if alone; `packs_natively` says whether that is one kernel call (softmax, linear, gla,
    lrnn-decay priors) or one forward per sequence.
    max_len: the longest sequence it will see (mixers with learned position tables need it; 0 = unknown)."""

    def __init__(self, spec: str, dim: int, max_len: int = 0):
        super().__init__(_classes().Mixer(spec, dim, max_len))
        self.spec = self._bound.spec()
        self.dim = self._bound.dim()
        self.max_len = self._bound.max_len()
        self.is_causal = self._bound.is_causal()

    def _construction(self):
        return "Mixer", (self.spec, self.dim, self.max_len)

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None,
                cu_seqlens: Optional[Tensor] = None) -> Tensor:
        if cu_seqlens is not None:
            if padding_mask is not None:
                raise ValueError("Mixer.forward: give padding_mask or cu_seqlens, not both (a packed batch has no "
                                 "padding)")
            return self._call(x, cu_seqlens, _compile.PACKED)
        if padding_mask is not None:
            return self._call(x, padding_mask, _compile.MASKED)
        return self._call(x, None, _compile.PLAIN)

    def _forward_form(self, x: Tensor, extra: Optional[Tensor], form: int) -> Tensor:
        """The C++ forward in `form` (on whatever the slots hold)."""
        if form == _compile.PACKED:
            return self._bound.forward_packed(x, extra)
        if form == _compile.MASKED:
            return self._bound.forward_masked(x, extra)
        return self._bound.forward(x)

    @property
    def packs_natively(self) -> bool:
        return self._bound.packs_natively()



class ChannelMixer(_AddsLoss, _Bound):
    """A channel mixer by its spec ("swiglu", "mlp", "moe:experts=4", ...): forward(x [..., dim]) -> [..., dim]."""

    def __init__(self, spec: str, dim: int):
        super().__init__(_classes().ChannelMixer(spec, dim))
        self.spec = spec
        self.dim = dim

    def _construction(self):
        return "ChannelMixer", (self.spec, self.dim)

    def forward(self, x: Tensor) -> Tensor:
        return self._call(x, None, _compile.PLAIN)

    def _forward_form(self, x: Tensor, extra: Optional[Tensor], form: int) -> Tensor:
        return self._bound.forward(x)


class Model(_AddsLoss, _Decodes, _Bound):
    """A model by its spec (`seqmix list` "Models": lm, autoencoder, probe, forecaster, dlinear) around the
    given mixers, sized as a task would size it."""

    def __init__(self, spec: str = "lm", mixers: Sequence[str] = ("softmax",), vocab_size: int = 0,
                 input_features: int = 0, output_features: int = 0, seq_len: int = 0, output_len: int = 0,
                 _bound=None):
        if _bound is None:
            _bound = _classes().Model(spec, list(mixers), vocab_size, input_features, output_features, seq_len,
                                      output_len)
        super().__init__(_bound)
        self.spec = self._bound.spec()

    def _construction(self):
        return "Model", tuple(self._bound.construction())

    def forward(self, inputs: Tensor, cu_seqlens: Optional[Tensor] = None,
                sequence_starts: Optional[Tensor] = None) -> Tensor:
        """tokens [B,T] (int64) -> logits [B,T,V], or features [B,T,F] -> outputs.

        Packed sequences (the lm model): inputs [1,N] with cu_seqlens (int64 [S+1] offsets), or rows [B,T] with
        sequence_starts (bool [B,T], true at each sequence's first token; every row's first token begins one, as
        in a text task's pack=1 batches). Each sequence is read as if alone, its positions from 0."""
        if cu_seqlens is not None:
            if sequence_starts is not None:
                raise ValueError("Model.forward: give cu_seqlens or sequence_starts, not both")
            n = inputs.size(1)
            if not torch.compiler.is_compiling():  # the checks read the offsets' values, which a trace does not
                if inputs.dim() < 2 or inputs.size(0) != 1:
                    raise ValueError(f"Model.forward: packed inputs with cu_seqlens must be [1,N,...] (got "
                                     f"{tuple(inputs.shape)})")
                if cu_seqlens.dtype != torch.int64 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
                    raise ValueError("Model.forward: cu_seqlens must be int64 [S+1]")
                if int(cu_seqlens[0]) != 0 or int(cu_seqlens[-1]) != n or bool((cu_seqlens.diff() < 0).any()):
                    raise ValueError(f"Model.forward: cu_seqlens must rise from 0 to the packed length {n} (got "
                                     f"{cu_seqlens.tolist()[:8]}...)")
            # True at each sequence's first token; an empty sequence's offset n lands in the extra slot cut off.
            starts = torch.zeros(n + 1, dtype=torch.bool, device=inputs.device)
            sequence_starts = starts.index_fill(0, cu_seqlens[:-1], True)[:n].unsqueeze(0)
        if sequence_starts is not None:
            return self._call(inputs, sequence_starts, _compile.PACKED)
        return self._call(inputs, None, _compile.PLAIN)

    def _forward_form(self, inputs: Tensor, extra: Optional[Tensor], form: int) -> Tensor:
        return self._bound.forward_packed(inputs, extra) if form == _compile.PACKED else self._bound.forward(inputs)

    @torch.no_grad()
    def generate(self, prompt: Tensor, tokens: int, temperature: float = 1.0, top_k: int = 0, seed: int = 0) -> Tensor:
        """prompt [B,T0] tokens -> [B,T0+tokens], sampled step by step (temperature 0 = greedy), as `seqmix
        generate` does."""
        return _binding.bound_now(self).generate(prompt, tokens, temperature, top_k, seed)


class LanguageModel(Model):
    """The lm model ("lm:dim=...,layers=...", options as `seqmix list` shows them: channel, norm, residual,
    final_norm, tie, head_bias, pos, dropout), one mixer spec per layer (cycled)."""

    def __init__(self, vocab_size: int, mixers: Sequence[str] = ("softmax",), dim: int = 128, layers: int = 2,
                 max_len: int = 0, **options):
        spec = ",".join([f"dim={dim}", f"layers={layers}"] + [f"{k}={_option_text(v)}" for k, v in options.items()])
        super().__init__("lm:" + spec, mixers, vocab_size=vocab_size, seq_len=max_len)


def _option_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _needs_runs(what: str) -> None:
    """Raises the one-line error of a build without the run loader (the pip package) for `what`."""
    if not build_info()["runs"]:
        raise RuntimeError(
            f"{what} needs seqmix's run library (tasks, configs, checkpoints: the checkout's build, scripts/setup.sh); "
            "this is the pip package, which holds the ops, layers and models (docs/python.md lists the difference)")


def save_weights(model: Model, path: str) -> None:
    """Writes the model's parameters and buffers as a checkpoint's weights file (their own names, the
    model.state_dict() names, metadata format=pt), atomically: `seqmix eval --run DIR --weights path` and
    `seqmix train --init-from path` read it, and so does safetensors.torch.load_file. (Without the run library,
    safetensors.torch.save_file(model.state_dict(), path, metadata={"format": "pt"}) writes the same file.)"""
    _needs_runs("seqmix.save_weights")
    _binding.bound_now(model).save_weights(str(path))


class Tokenizer:
    """A text run's tokenizer: encode(str) -> list of ids, decode(ids) -> str."""

    def __init__(self, bound):
        self._bound = bound

    def encode(self, text: str) -> List[int]:
        return list(self._bound.encode(text))

    def decode(self, ids) -> str:
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        return self._bound.decode([int(i) for i in ids])


class _SentencePieceTokenizer:
    """A text run's tokenizer.model read by the sentencepiece package (the pip package has no C++ tokenizer), handed
    text as seqmix's tokenizer hands it (_text.py): the same ids as seqmix's (python/tests/test_modules.py checks it
    against the checkout's tokenizer)."""

    def __init__(self, path: str):
        self.path = path
        self._loaded = None

    def _processor(self):
        if self._loaded is not None:
            return self._loaded
        if not os.path.exists(self.path):
            raise RuntimeError(f"this run has no tokenizer ({self.path} does not exist: not a text run)")
        try:
            import sentencepiece
        except ImportError:
            raise RuntimeError("reading a text run's tokenizer without seqmix's run library needs the sentencepiece "
                               "package (pip install sentencepiece)") from None
        self._loaded = sentencepiece.SentencePieceProcessor(model_file=self.path)
        self._newline = _text.newline_piece(self._loaded)
        return self._loaded

    def encode(self, text: str) -> List[int]:
        processor = self._processor()
        return list(processor.encode(_text.to_pieces_text(text, self._newline)))

    def decode(self, ids) -> str:
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        processor = self._processor()
        return _text.from_pieces_text(processor.decode([int(i) for i in ids]), self._newline)


class Run:
    """A trained run: run.model (a seqmix.Model holding the checkpoint's weights), run.tokenizer (text runs),
    run.generate(prompt), run.evaluate() (the test-set loss, computed here as `seqmix eval` computes it)."""

    def __init__(self, path: str, step: Optional[int] = None, device=None):
        self.path = str(path)
        self._init(step)
        if device is not None:
            self.model.to(device)  # checkpoints are read on the CPU, whatever device wrote them

    @property
    def device(self) -> torch.device:
        """Where the run's model lives (load_run's device, or where .model.to() moved it)."""
        return next(self.model.parameters()).device

    def _init(self, step: Optional[int]) -> None:
        if not build_info()["runs"]:
            self._from_record(step)
            return
        self._bound = _classes().Run(self.path, -1 if step is None else int(step))
        self.step = self._bound.step()
        self.task = self._bound.task()
        model = self._bound.model()
        # An lm run's model is a LanguageModel (isinstance holds); the other models are Models.
        self.model = Model.__new__(LanguageModel if model.spec().split(":")[0] == "lm" else Model)
        Model.__init__(self.model, _bound=model)
        self.model.eval()
        self.tokenizer = Tokenizer(self._bound)

    def _from_record(self, step: Optional[int]) -> None:
        """Without the run library (the pip package): the model a checkpoint's record describes (its spec, mixers
        and sizes), holding that checkpoint's weights, read in Python; no task, so no test set or metrics. A text
        run's tokenizer.model reads with the sentencepiece package when it is installed (same ids)."""
        self._bound = None
        steps = checkpoint_steps(self.path)
        if not steps:
            raise CheckpointError(f"{self.path}: no checkpoint (no checkpoints/step-*.json record)")
        self.step = steps[-1] if step is None else int(step)
        tensors = load_checkpoint(self.path, self.step)
        record_path = os.path.join(self.path, "checkpoints", f"step-{self.step:08d}.json")
        with open(record_path) as f:
            record = json.load(f).get("model")
        if record is None:
            raise CheckpointError(f"{record_path}: no model record (written by `seqmix train` since version 0.1.0's "
                                  "pip package); load the run with the checkout's build")
        kind = LanguageModel if record["spec"].split(":")[0] == "lm" else Model
        self.model = Model.__new__(kind)
        Model.__init__(self.model, record["spec"], record["mixers"], record["vocab_size"], record["input_features"],
                       record["output_features"], record["seq_len"], record["output_len"])
        self.model.load_state_dict(model_state(tensors))
        self.model.eval()
        self.task = None
        self.tokenizer = _SentencePieceTokenizer(os.path.join(self.path, "tokenizer.model"))

    def test_set(self) -> Tuple[Tensor, Tensor]:
        """(inputs, targets) of the task's held-out set."""
        _needs_runs("Run.test_set")
        return self._bound.test_set()

    def loss(self, outputs: Tensor, inputs: Tensor, targets: Tensor) -> Tensor:
        """The task's loss of the model's outputs (what training minimises)."""
        _needs_runs("Run.loss")
        return self._bound.loss(outputs, inputs, targets)

    @torch.no_grad()
    def evaluate(self) -> float:
        """The test-set loss: the model's forward in this process, batch by batch in the task's evaluation batch
        size, the per-example mean as `seqmix eval` reports it."""
        was_training = self.model.training
        self.model.eval()
        inputs, targets = self.test_set()
        size = self._bound.eval_batch_size()
        total, count = 0.0, 0
        for begin in range(0, inputs.shape[0], size):
            x, y = inputs[begin:begin + size].to(self.device), targets[begin:begin + size].to(self.device)
            total += self.loss(self.model(x), x, y).item() * x.shape[0]
            count += x.shape[0]
        self.model.train(was_training)
        return total / count

    def metrics(self) -> Dict[str, float]:
        """Every metric of `seqmix eval`, by the C++ evaluation."""
        _needs_runs("Run.metrics")
        _binding.bound_now(self.model)  # the run's C++ model is the model's: it evaluates the tensors held now
        return dict(self._bound.metrics())

    def generate(self, prompt: str, tokens: int = 200, temperature: float = 1.0, top_k: int = 0, seed: int = 0) -> str:
        """The prompt and its continuation, as `seqmix generate --run ... --prompt ...` prints it."""
        ids = torch.tensor([self.tokenizer.encode(prompt)], dtype=torch.long, device=self.device)
        return self.tokenizer.decode(self.model.generate(ids, tokens, temperature, top_k, seed)[0].cpu())


def load_run(path: str, step: Optional[int] = None, device=None) -> Run:
    """The run a `seqmix train` directory holds, with the weights of its latest checkpoint (or the one at step), on
    `device` ("cpu", "cuda", a torch.device; default the CPU) whatever device trained it."""
    return Run(path, step, device)
