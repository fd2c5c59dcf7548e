"""Certificates for sequence mixers: seqmix's own (by spec) and any nn.Module mapping [B,T,D] -> [B,T,D].

    report = seqmix.verify(my_module, dim=64)              # a user's module; decode, packing, ... when given
    report = seqmix.verify_mixer("fem:prior=gla", dim=32)   # a registered mixer, with everything it offers
    print(report)                                           # one row per module, one column per certificate
    report.passed                                           # False when any applicable certificate fails

Each certificate runs the module on sampled inputs (seeded) and compares with a stated tolerance, so a pass says
"no violation on these inputs", not a proof for every input; docs/verify.md says what each one proves and misses.
`seqmix verify --mixer SPEC` (and `python -m seqmix verify`) prints the table for registered mixers.
"""
import argparse
import copy
import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch.autograd.gradcheck import GradcheckError

__all__ = ["verify", "verify_mixer", "Report", "Certificate", "CERTIFICATES"]

# The certificates, in the table's column order, with what each checks.
CERTIFICATES = {
    "causal": "changing token t to another value changes no output before t (exact), nor does a NaN or inf at t "
              "beyond rounding (1e-12 of the scale: kernels take their masked path, which sums in another order), "
              "and no gradient flows from an output to a later input (exact)",
    "decode": "prefill in two chunks plus token-by-token steps equals one forward (float64, 1e-9 of the scale)",
    "fused=naive": "every other implementation in float32 equals the reference in float64, outputs and gradients "
                   "(1e-4 of the scale)",
    "packed": "sequences packed with cu_seqlens equal each sequence alone (float64, 1e-9 of the scale)",
    "padding": "what padded positions hold (values, NaN) never moves a real output (exact)",
    "gradcheck": "the input gradient equals central finite differences (float64, torch.autograd.gradcheck)",
    "batch": "sample i never affects sample j, values or gradients (exact, NaN included)",
    "deterministic": "two runs from the same seed give bitwise equal outputs and gradients",
    "dtypes": "as a bf16 and an fp16 module, outputs within 8 eps of the dtype of float32 on the same rounded "
              "weights and inputs (relative to the output scale)",
    "cuda": "on a GPU, outputs and input gradients equal the CPU's (1e-4 of the scale)",
}

CAUSAL_NONFINITE_TOL, DECODE_TOL, PACKED_TOL, REFERENCE_TOL, DTYPE_EPS, CUDA_TOL = 1e-12, 1e-9, 1e-9, 1e-4, 8.0, 1e-4


@dataclass
class Certificate:
    name: str
    status: str  # "pass", "fail" or "n/a"
    detail: str = ""

    def cell(self) -> str:
        if self.status == "pass":
            return "pass"
        return ("FAIL " if self.status == "fail" else "n/a: ") + self.detail


@dataclass
class Row:
    name: str
    certificates: Dict[str, Certificate] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.status != "fail" for c in self.certificates.values())


class Report:
    """The certificates of one or more modules: print() gives the table, .passed whether nothing failed,
    .to_json() the same for machines, report[name][certificate] one Certificate."""

    def __init__(self, rows: Sequence[Row] = ()):
        self.rows = list(rows)

    def __getitem__(self, name: str) -> Dict[str, Certificate]:
        for row in self.rows:
            if row.name == name:
                return row.certificates
        raise KeyError(name)

    def __add__(self, other: "Report") -> "Report":
        return Report(self.rows + other.rows)

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    def failures(self) -> List[str]:
        return [f"{row.name} {c.name}: {c.detail}" for row in self.rows for c in row.certificates.values()
                if c.status == "fail"]

    def to_json(self) -> dict:
        return {"passed": self.passed, "certificates": CERTIFICATES,
                "rows": [{"name": row.name, "passed": row.passed,
                          "certificates": {n: {"status": c.status, "detail": c.detail}
                                           for n, c in row.certificates.items()}} for row in self.rows]}

    def __str__(self) -> str:
        names = list(CERTIFICATES)
        header = ["module"] + names
        lines = [[row.name] + [row.certificates[n].cell() if n in row.certificates else "" for n in names]
                 for row in self.rows]
        widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
        out = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
               "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        out += ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in lines]
        return "\n".join(out)

    __repr__ = __str__


# ---- helpers ----------------------------------------------------------------------------------------------------

def _differs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Where a and b are not bitwise the same value (NaN equals NaN)."""
    return ~((a == b) | (a.isnan() & b.isnan()))


def _size(a: torch.Tensor, b: torch.Tensor) -> float:
    d = (a.double() - b.double()).abs()
    return float(torch.nan_to_num(d, nan=math.inf).max()) if d.numel() else 0.0


def _worst(a: torch.Tensor, b: torch.Tensor, where: torch.Tensor):
    """(index, size) of the largest difference of a and b among the positions `where` marks (NaN counts as inf)."""
    d = torch.nan_to_num((a.double() - b.double()).abs(), nan=math.inf, posinf=math.inf)
    d = torch.where(where, d, torch.zeros_like(d))
    flat = int(d.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), d.shape))
    return index, float(d.flatten()[flat])


def _scale(t: torch.Tensor) -> float:
    finite = t[torch.isfinite(t)]
    return max(1.0, float(finite.abs().max())) if finite.numel() else 1.0


def _copy(module, dtype=None, device=None):
    copied = copy.deepcopy(module)
    copied.eval()
    if dtype is not None or device is not None:
        copied = copied.to(device=device, dtype=dtype)
    return copied


def _floating_parameters(module) -> List[torch.Tensor]:
    return [p for p in module.parameters() if p.requires_grad and p.is_floating_point()]


def _run(module, x, **kwargs):
    """(outputs, input gradient, parameter gradients) of the sum of outputs times fixed weights."""
    x = x.detach().clone().requires_grad_(True)
    y = module(x, **kwargs)
    weights = torch.linspace(-1, 1, y.numel(), dtype=y.dtype, device=y.device).view_as(y)
    params = _floating_parameters(module)
    grads = torch.autograd.grad((y * weights).sum(), [x] + params, allow_unused=True)
    return y.detach(), grads[0], list(grads[1:])


class _Subject:
    """What the certificates need of a module: forward, and optionally decode, packing, padding, a reference."""

    def __init__(self, module, dim, causal, init_state, step, prefill, packed, masked, reference, batch, length,
                 seed, name):
        self.module, self.dim, self.causal = module, dim, causal
        self.init_state, self.step, self.prefill = init_state, step, prefill
        self.packed, self.masked, self.reference = packed, masked, reference
        self.batch, self.length, self.seed, self.name = batch, length, seed, name

    def inputs(self, dtype=torch.float64, batch=None, length=None):
        g = torch.Generator().manual_seed(self.seed)
        return torch.randn(batch or self.batch, length or self.length, self.dim, generator=g).to(dtype)

    def noise(self, like: torch.Tensor, salt: int) -> torch.Tensor:
        """Seeded values for a perturbation (3 x standard normal), the same on every run."""
        g = torch.Generator().manual_seed(self.seed * 1000003 + salt)
        return torch.randn(like.shape, generator=g, dtype=like.dtype) * 3


# ---- the certificates -------------------------------------------------------------------------------------------

def _causal(s: _Subject) -> Certificate:
    if not s.causal:
        return Certificate("causal", "n/a", "bidirectional by design")
    f = _copy(s.module, torch.float64)
    x = s.inputs()
    with torch.no_grad():
        y = f(x)
        worst = None
        for t in range(1, s.length):
            for label, value in (("a new value", s.noise(x[:, t], t)), ("NaN", math.nan), ("inf", math.inf)):
                x2 = x.clone()
                x2[:, t] = value
                before, ref = f(x2)[:, :t], y[:, :t]
                moved = _differs(before, ref)
                if label != "a new value":  # a NaN or inf may change the rounding of the past, never more
                    moved &= ~((before - ref).abs() <= CAUSAL_NONFINITE_TOL * _scale(ref))
                if moved.any():
                    index, size = _worst(before, ref, moved)
                    s_pos = index[1]
                    if worst is None or size > worst[0]:
                        worst = (size, f"token {t} set to {label} moved output {s_pos} by {size:.3g}")
    if worst:
        return Certificate("causal", "fail", worst[1])
    x = x.clone().requires_grad_(True)
    y = f(x)
    for t in range(s.length - 1):
        (g,) = torch.autograd.grad(y[:, t].sum(), x, retain_graph=True)
        later = g[:, t + 1:]
        if _differs(later, torch.zeros_like(later)).any():
            j = t + 1 + int(_differs(later, torch.zeros_like(later)).nonzero()[0, 1])
            return Certificate("causal", "fail", f"output {t} has a gradient {_size(later, 0 * later):.3g} from "
                                                 f"later input {j}")
    return Certificate("causal", "pass")


def _decode(s: _Subject) -> Certificate:
    if s.step is None or s.init_state is None:
        return Certificate("decode", "n/a", "no decode step given" if s.causal else "bidirectional")
    f = _copy(s.module, torch.float64)
    x = s.inputs()
    with torch.no_grad():
        full = f(x)
        state = s.init_state(f, s.batch)
        outs, t = [], 0
        if s.prefill is not None:  # two chunks, leaving at least two tokens to the steps
            for end in (min(3, s.length - 2), min(7, s.length - 2)):
                if end > t:
                    outs.append(s.prefill(f, x[:, t:end], state))
                    t = end
        for t in range(t, s.length):
            outs.append(s.step(f, x[:, t], state).unsqueeze(1))
        decoded = torch.cat(outs, 1)
    bad = (decoded - full).abs() > DECODE_TOL * _scale(full)
    bad |= _differs(decoded.isnan(), full.isnan())
    if bad.any():
        t = int(bad.nonzero()[0, 1])
        return Certificate("decode", "fail", f"position {t} decodes {_size(decoded[:, t], full[:, t]):.3g} away "
                                             "from the forward")
    return Certificate("decode", "pass")


def _named_gradients(module, grads) -> Dict[str, Optional[torch.Tensor]]:
    return dict(zip([n for n, p in module.named_parameters() if p.requires_grad and p.is_floating_point()], grads))


def _reference(s: _Subject) -> Certificate:
    if s.reference is None:
        return Certificate("fused=naive", "n/a", "one implementation")
    x = s.inputs()
    reference = _copy(s.reference, torch.float64)
    ref_y, ref_gx, ref_gp = _run(reference, x)
    ref_named = _named_gradients(reference, ref_gp)
    for label, impl in s.implementations():
        module = _copy(impl, torch.float32)
        y, gx, gp = _run(module, x.float())
        named = _named_gradients(module, gp)
        checks = [("output", y, ref_y), ("input gradient", gx, ref_gx)]
        if set(named) == set(ref_named):  # the same parameters: every gradient, a missing one as zero
            for name, b in ref_named.items():
                a = named[name]
                if a is None and b is None:
                    continue
                like = a if a is not None else b
                checks.append((f"gradient of {name}", torch.zeros_like(like) if a is None else a,
                               torch.zeros_like(like) if b is None else b))
        for what, a, b in checks:
            index, size = _worst(a, b, torch.ones_like(b, dtype=torch.bool))
            if size > REFERENCE_TOL * max(_scale(ref_y), _scale(b)):
                return Certificate("fused=naive", "fail", f"{label}: {what} {size:.3g} from the reference at {index}")
    return Certificate("fused=naive", "pass")


def _packed(s: _Subject) -> Certificate:
    if not s.packed:
        return Certificate("packed", "n/a", "takes no cu_seqlens")
    f = _copy(s.module, torch.float64)
    lengths = [3, 1, s.length, 5]
    x = s.inputs(batch=1, length=sum(lengths))
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int64)
    with torch.no_grad():
        packed = f(x, cu_seqlens=cu)
        alone = torch.cat([f(x[:, int(a):int(b)]) for a, b in zip(cu[:-1], cu[1:])], 1)
    bad = ((packed - alone).abs() > PACKED_TOL * _scale(alone)) | _differs(packed.isnan(), alone.isnan())
    if bad.any():
        index, size = _worst(packed, alone, bad)
        t = index[1]
        seq = int((cu[1:] <= t).sum())
        return Certificate("packed", "fail", f"sequence {seq} (packed position {t}) is {size:.3g} from itself alone")
    return Certificate("packed", "pass")


def _padding(s: _Subject) -> Certificate:
    if not s.masked:
        return Certificate("padding", "n/a", "takes no padding mask")
    f = _copy(s.module, torch.float64)
    x = s.inputs()
    mask = torch.ones(s.batch, s.length, dtype=torch.bool)
    mask[-1, s.length // 2:] = False
    mask[0, : s.length // 3] = False
    outs = []
    with torch.no_grad():
        for fill in (0.0, 7.0, math.nan, math.inf):
            x2 = x.clone()
            x2[~mask] = fill
            outs.append(f(x2, padding_mask=mask))
    for other in outs[1:]:
        moved = _differs(other, outs[0]) & mask.unsqueeze(-1)
        if moved.any():
            (b, t, _), size = _worst(other, outs[0], moved)
            return Certificate("padding", "fail", f"a padded position's value moved the real output at sample {b}, "
                                                  f"position {t} by {size:.3g}")
    if not torch.isfinite(outs[0][mask]).all():
        return Certificate("padding", "fail", "NaN or inf at padded positions reached a real output")
    # and the real tokens read as if alone (padding holds no place in the sequence)
    with torch.no_grad():
        for b in range(s.batch):
            real = x[b:b + 1, mask[b]]
            alone, padded = f(real), outs[0][b:b + 1, mask[b]]
            if _size(alone, padded) > PACKED_TOL * _scale(alone):
                (_, t, _), size = _worst(padded, alone, torch.ones_like(alone, dtype=torch.bool))
                return Certificate("padding", "fail", f"sample {b}'s real tokens read {size:.3g} from themselves alone "
                                                      f"(real position {t})")
    return Certificate("padding", "pass")


def _gradcheck(s: _Subject) -> Certificate:
    f = _copy(s.module, torch.float64)
    x = s.inputs(batch=1, length=min(5, s.length)).requires_grad_(True)
    try:
        torch.autograd.gradcheck(lambda t: f(t), (x,), eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=False)
    except GradcheckError as error:
        first = str(error).strip().splitlines()[0]
        return Certificate("gradcheck", "fail", first[:160])
    return Certificate("gradcheck", "pass")


def _batch(s: _Subject) -> Certificate:
    f = _copy(s.module, torch.float64)
    x = s.inputs(batch=max(2, s.batch))
    with torch.no_grad():
        y = f(x)
        for label, value in (("a new value", None), ("NaN", math.nan)):
            x2 = x.clone()
            x2[0] = s.noise(x[0], 0) if value is None else value
            others = f(x2)[1:]
            moved = _differs(others, y[1:])
            if moved.any():
                (j, t, _), size = _worst(others, y[1:], moved)
                return Certificate("batch", "fail", f"sample 0 set to {label} moved sample {j + 1} (position {t}) by "
                                                    f"{size:.3g}")
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x)[1:].sum(), x)
    if _differs(g[0], torch.zeros_like(g[0])).any():
        return Certificate("batch", "fail", f"sample 1's outputs have a gradient {_size(g[0], 0 * g[0]):.3g} from "
                                            "sample 0")
    return Certificate("batch", "pass")


def _deterministic(s: _Subject) -> Certificate:
    runs = []
    for _ in range(2):
        torch.manual_seed(s.seed)
        f = _copy(s.module)
        f.train(s.module.training)
        runs.append(_run(f, s.inputs(torch.float32)))
    (y0, gx0, gp0), (y1, gx1, gp1) = runs
    pairs = [("output", y0, y1), ("input gradient", gx0, gx1)] + [
        (f"gradient of parameter {i}", a, b) for i, (a, b) in enumerate(zip(gp0, gp1)) if a is not None]
    for what, a, b in pairs:
        if _differs(a, b).any():
            return Certificate("deterministic", "fail", f"{what} differs between two runs by {_size(a, b):.3g}")
    return Certificate("deterministic", "pass")


def _dtypes(s: _Subject) -> Certificate:
    worst = []
    for dtype in (torch.bfloat16, torch.float16):
        low = _copy(s.module, dtype)
        x = s.inputs(dtype)
        reference = _copy(low, torch.float32)  # the same rounded weights, in float32
        with torch.no_grad():
            y = low(x).float()
            ref = reference(x.float())
        size = _size(y, ref) / _scale(ref)
        eps = torch.finfo(dtype).eps
        worst.append(f"{str(dtype).split('.')[-1]} {size / eps:.2g} eps")
        if not size <= DTYPE_EPS * eps:
            return Certificate("dtypes", "fail", f"{str(dtype).split('.')[-1]}: {size / eps:.3g} eps of the scale "
                                                 f"from float32 (tolerance {DTYPE_EPS:g})")
    return Certificate("dtypes", "pass", ", ".join(worst))


def _cuda(s: _Subject) -> Certificate:
    if not torch.cuda.is_available():
        return Certificate("cuda", "n/a", "no GPU")
    x = s.inputs(torch.float32)
    try:
        gpu = _run(_copy(s.module, torch.float32, "cuda"), x.cuda())
    except RuntimeError as error:
        return Certificate("cuda", "fail", str(error).splitlines()[0][:160])
    cpu = _run(_copy(s.module, torch.float32), x)
    for what, a, b in (("output", gpu[0].cpu(), cpu[0]), ("input gradient", gpu[1].cpu(), cpu[1])):
        if _size(a, b) > CUDA_TOL * _scale(b):
            return Certificate("cuda", "fail", f"{what} {_size(a, b):.3g} from the CPU's")
    return Certificate("cuda", "pass")


_RUNNERS = {"causal": _causal, "decode": _decode, "fused=naive": _reference, "packed": _packed,
            "padding": _padding, "gradcheck": _gradcheck, "batch": _batch, "deterministic": _deterministic,
            "dtypes": _dtypes, "cuda": _cuda}


def _certify(subject: _Subject, only: Optional[Sequence[str]] = None) -> Report:
    row = Row(subject.name)
    for name, runner in _RUNNERS.items():
        if only and name not in only:
            continue
        try:
            row.certificates[name] = runner(subject)
        except Exception as error:  # a module that raises under a certificate's inputs fails it, named
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            row.certificates[name] = Certificate(name, "fail", f"raised {type(error).__name__}: {message[:140]}")
    return Report([row])


# ---- entry points -----------------------------------------------------------------------------------------------

def verify(module: torch.nn.Module, dim: int, *, causal: bool = True,
           init_state: Optional[Callable] = None, step: Optional[Callable] = None, prefill: Optional[Callable] = None,
           packed: bool = False, masked: bool = False, reference: Optional[torch.nn.Module] = None,
           implementations: Optional[Dict[str, torch.nn.Module]] = None, batch: int = 2, length: int = 12,
           seed: int = 0, name: Optional[str] = None, only: Optional[Sequence[str]] = None) -> Report:
    """Runs every certificate on `module` (x [B,T,dim] -> [B,T,dim]) and returns the Report.

    causal: whether outputs may read only the past (False: the causality certificate does not apply).
    init_state(module, batch) -> state, step(module, x_t [B,dim], state) -> y_t [B,dim] (advancing state), and
    optionally prefill(module, x [B,T',dim], state) -> y [B,T',dim]: the decode path to hold to the forward
    (`module` is the certificate's float64 copy).
    packed: the module takes cu_seqlens= (int64 offsets of sequences packed along T, batch 1); masked: it takes
    padding_mask= (bool [B,T], True at real tokens).
    reference: a module to hold `module` to, or implementations {label: module} to hold to `reference` (the
    reference runs in float64, the others in float32). only: the certificates to run (default all).
    The module is never changed: each certificate works on a deep copy, in eval mode (determinism in the module's
    own mode), and the global random generator is left as it was."""
    unknown = set(only or ()) - set(CERTIFICATES)
    if unknown:
        raise ValueError(f"seqmix.verify: unknown certificate(s) {sorted(unknown)}; known: {list(CERTIFICATES)}")
    if dim < 1 or batch < 2 or length < 2:
        raise ValueError(f"seqmix.verify: dim must be >= 1, batch and length >= 2 (got {dim}, {batch}, {length})")
    if implementations and reference is None:
        raise ValueError("seqmix.verify: implementations= needs the reference= to hold them to")
    subject = _Subject(module, dim, causal, init_state, step, prefill, packed, masked, reference, batch, length, seed,
                       name or type(module).__name__)
    impls = dict(implementations or {})
    if reference is not None and not impls:
        impls = {"module": module}
    subject.implementations = lambda: list(impls.items())
    with torch.random.fork_rng():  # the certificates seed what they draw; the caller's generator is left alone
        return _certify(subject, only)


def verify_mixer(spec: str, dim: int = 32, max_len: int = 64, *, length: int = 12, seed: int = 0,
                 only: Optional[Sequence[str]] = None) -> Report:
    """The certificates of a registered mixer by its spec (`seqmix list`): its decode path, packing, padding (FEM)
    and every implementation it offers (impl=...) against impl=naive run in float64."""
    from .modules import Mixer, registry

    max_len = max(max_len, length + 9)  # the packed certificate's row: sequences of 3, 1, length and 5 tokens
    with torch.random.fork_rng():  # building the mixers draws their weights: the caller's generator is left alone
        torch.manual_seed(seed)
        return _verify_built_mixer(Mixer, registry, spec, dim, max_len, length, seed, only)


def _verify_built_mixer(Mixer, registry, spec, dim, max_len, length, seed, only) -> Report:
    mixer = Mixer(spec, dim, max_len)
    name = spec.split(":")[0]
    entry = next((m for m in registry()["mixers"] if m["name"] == name), None)
    impl_option = next((o for o in entry["options"] if o["key"] == "impl"), None) if entry else None
    impls = [i for i in impl_option["type"].split("|") if i != "auto"] if impl_option else []
    reference, implementations = None, {}
    if "naive" in impls and len(impls) > 1:
        def variant(impl):
            """The mixer with impl=`impl` and the same weights, or None where its options have no such impl (FEM's
            delta prior has only its naive read)."""
            try:
                m = Mixer(re.sub(r"\bimpl=[a-z]+", f"impl={impl}", mixer.spec), dim, max_len)
            except RuntimeError as error:
                if "has no impl" in str(error):
                    return None
                raise
            m.load_state_dict(mixer.state_dict())
            return m
        implementations = {f"impl={i}": variant(i) for i in impls if i != "naive"}
        implementations = {k: m for k, m in implementations.items() if m is not None}
        reference = variant("naive") if implementations else None
    decodes = mixer.is_causal
    return verify(mixer, dim, causal=mixer.is_causal,
                  init_state=(lambda m, b: m.init_state(b)) if decodes else None,
                  step=(lambda m, x_t, st: m.step(x_t, st)) if decodes else None,
                  prefill=(lambda m, x, st: m.prefill(x, st)) if decodes else None,
                  packed=True, masked=name == "fem", reference=reference, implementations=implementations,
                  length=length, seed=seed, name=spec, only=only)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, as every seqmix error
        print(f"seqmix verify: error: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _Parser(prog="seqmix verify", description="Certificates for registered sequence mixers "
                                     "(docs/verify.md): one row per mixer, one column per certificate.")
    parser.add_argument("--mixer", action="append", default=[], help="a mixer spec (repeatable); default: every "
                        "registered mixer")
    parser.add_argument("--dim", type=int, default=32, help="model width (default 32)")
    parser.add_argument("--seq-len", type=int, default=12, help="sequence length of the sampled inputs (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled inputs and weights (default 0)")
    parser.add_argument("--only", action="append", choices=list(CERTIFICATES), help="run only these certificates")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.dim < 1 or args.seq_len < 2:
        parser.error(f"--dim must be >= 1 and --seq-len >= 2 (got {args.dim}, {args.seq_len})")
    from .modules import registry

    specs = args.mixer or [m["name"] for m in registry()["mixers"]]
    report = Report()
    for spec in specs:
        try:
            report = report + verify_mixer(spec, args.dim, max(64, args.seq_len * 4), length=args.seq_len,
                                           seed=args.seed, only=args.only)
        except (RuntimeError, ValueError) as error:  # a bad spec: the library's one-line error
            print(f"seqmix verify: error: {str(error).strip().splitlines()[0]}", file=sys.stderr)
            return 2
    print(json.dumps(report.to_json(), indent=2) if args.json else report)
    return 0 if report.passed else 1

