"""HyperMLP / HyperGLU, MHA2nd1st, LightMHA2nd1st and the energy mixer against the independent plain-PyTorch
references of python/reference/hyper_energy_reference.py (float64, same weights): the forward output and the
gradients w.r.t. the input and every parameter, for the main labels and options."""
import math
import unittest

import torch

import hyper_energy_reference as ref
import seqmix
from closeness import ATOL, RTOL, assert_close

torch.set_num_threads(1)

B = 2
LENGTHS = (7, 13)
MAX_DIFF = {}  # case -> the largest difference seen (relative to the magnitude), printed at the end


class RecordingDict(dict):
    """A weight dict that remembers which names the reference read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.used = set()

    def __getitem__(self, name):
        self.used.add(name)
        return super().__getitem__(name)


def default_randomise(name, p, generator):
    """Every parameter to a random value of a size that exercises its term (zero/one inits included)."""
    if name.endswith(".bias"):
        return torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.3
    if p.dim() == 2 and name.endswith(".weight") and not name.startswith("conv"):
        return torch.randn(p.shape, generator=generator, dtype=p.dtype) / math.sqrt(p.shape[1])
    return torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5


class ReferenceCase(unittest.TestCase):
    def compare(self, spec, dim, max_len, reference, randomise=default_randomise, lengths=LENGTHS,
                x_scale=1.0, seed=0):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        mixer = seqmix.Mixer(spec, dim, max_len).double()
        params = dict(mixer.named_parameters())
        keys = set(mixer.state_dict().keys())
        self.assertEqual(set(params), keys, "state_dict holds non-parameters")
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(randomise(name, p, generator))
        worst = 0.0
        for T in lengths:
            with self.subTest(spec=spec, T=T):
                for p in params.values():
                    p.grad = None
                x = (torch.randn(B, T, dim, generator=generator, dtype=torch.float64) * x_scale).requires_grad_()
                cotangent = torch.randn(B, T, dim, generator=generator, dtype=torch.float64)
                y = mixer(x)
                (y * cotangent).sum().backward()

                weights = RecordingDict({n: p.detach().clone().requires_grad_() for n, p in params.items()})
                xr = x.detach().clone().requires_grad_()
                yr = reference(xr, weights)
                (yr * cotangent).sum().backward()

                self.assertEqual(weights.used, keys, "the reference must read every parameter, and only those")
                worst = max(worst, self.close(y, yr, "output"))
                worst = max(worst, self.close(x.grad, xr.grad, "grad x"))
                for name, p in params.items():
                    self.assertIsNotNone(p.grad, f"{name}: no gradient in seqmix")
                    self.assertIsNotNone(weights[name].grad, f"{name}: no gradient in the reference")
                    worst = max(worst, self.close(p.grad, weights[name].grad, f"grad {name}"))
        MAX_DIFF[spec] = worst

    def close(self, actual, expected, what):
        diff = assert_close(self, actual, expected, what)
        self.assertGreater(expected.abs().max().item(), 0.0, f"{what} is identically zero: the term is not exercised")
        return diff


@classmethod
def _print_max_diff(cls):
    for case, diff in sorted(MAX_DIFF.items()):
        print(f"  max |seqmix - reference| / max(1, |reference|): {diff:.2e}  {case}")
    MAX_DIFF.clear()


# ----------------------------------------------------------------------------------------------------------
# HyperMLP / HyperGLU


def spec_options(spec):
    """The options of a "name:a=1,b=2" spec as a dict (values as text)."""
    _, _, rest = spec.partition(":")
    return dict(item.split("=", 1) for item in rest.split(",") if item)


def hyper_reference_for(spec, default_label):
    o = spec_options(spec)
    return lambda x, w: ref.hypermlp_reference(
        x, w, label=o.get("variant", default_label), heads=int(o.get("heads", 2)),
        rope_theta=float(o.get("rope_theta", 10000)), eps=float(o.get("eps", 1e-12)), bias=o.get("bias", "0") == "1")


class HyperMlpAgainstReference(ReferenceCase):
    tearDownClass = _print_max_diff

    def check(self, spec, dim=24, max_len=16):
        default = "G-cg-q-12o" if spec.startswith("hyperglu") else "R-cg-q-12o"
        self.compare(spec, dim, max_len, hyper_reference_for(spec, default))

    def test_default_hypermlp_label(self):  # R-cg-q-12o: matched QK budget, both mixers, lag layout
        self.check("hypermlp:mix_rank=1,block=4")

    def test_default_hyperglu_label(self):  # G-cg-q-12o
        self.check("hyperglu:mix_rank=1,block=5", dim=32, max_len=14)

    def test_over_budget_labels(self):
        self.check("hypermlp:variant=R-cg-12o!,mix_rank=3,block=5,bias=1")
        self.check("hyperglu:variant=G-cg-12o!,mix_rank=3,path=dense")

    def test_rope_labels(self):
        self.check("hypermlp:variant=R-pcg-q-12o,mix_rank=2,rope_theta=100", dim=32)
        self.check("hyperglu:variant=G-pcg-12o!,mix_rank=2,heads=3,block=3")

    def test_forward_layout(self):  # no o: parameter row = absolute key position
        self.check("hypermlp:variant=R-12!,mix_rank=2,bias=1,eps=0.05")
        self.check("hyperglu:variant=G-12!,mix_rank=2,path=dense,eps=0.01")

    def test_one_mixer_only(self):
        self.check("hypermlp:variant=R-1o!,mix_rank=2,heads=3")
        self.check("hypermlp:variant=R-2!,mix_rank=2,block=6")
        self.check("hyperglu:variant=G-2o!,mix_rank=2,qk_rank=8,vo_rank=12")

    def test_softmax_labels(self):
        self.check("hypermlp:variant=S-pc,rope_theta=300")
        self.check("hypermlp:variant=S-g-q")
        self.check("hypermlp:variant=S-pcg-12o!,mix_rank=2")

    def test_labels_without_mixing(self):
        self.check("hypermlp:variant=R,bias=1")
        self.check("hypermlp:variant=R-c-v")


# ----------------------------------------------------------------------------------------------------------
# MHA2nd1st and LightMHA2nd1st


def second_order_randomise(name, p, generator):
    if name == "temperature":  # T_h > 0 around its init sqrt(2 d_h)
        return p * (0.5 + torch.rand(p.shape, generator=generator, dtype=p.dtype))
    if name == "bias_temperature":  # c_h (or T_b), kept positive and O(0.1..1) so b is visible next to u
        return 0.2 + torch.rand(p.shape, generator=generator, dtype=p.dtype)
    if name == "tau":
        return torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5
    if name == "value_weight":
        return torch.randn(p.shape, generator=generator, dtype=p.dtype) / math.sqrt(p.shape[-1])
    return default_randomise(name, p, generator)


def kv_options(spec):
    o = spec_options(spec)
    return dict(heads=int(o.get("heads", 4)), rope_on=o.get("rope", "1") == "1",
                rope_theta=float(o.get("rope_theta", 10000)), bias=o.get("bias", "1") == "1",
                causal=o.get("causal", "1") == "1")


class SecondOrderAgainstReference(ReferenceCase):
    tearDownClass = _print_max_diff

    def mha(self, spec, dim=24):
        o = kv_options(spec)
        bt = spec_options(spec).get("bias_temperature", "multiplier")
        self.compare(spec, dim, 16, lambda x, w: ref.mha2nd1st_reference(x, w, bias_temperature=bt, **o),
                     randomise=second_order_randomise)

    def light(self, spec, dim=24):
        o = kv_options(spec)
        self.compare(spec, dim, 16, lambda x, w: ref.light2nd1st_reference(x, w, **o), randomise=second_order_randomise)

    def test_mha2nd1st(self):
        self.mha("mha2nd1st")                                  # RoPE, biases, causal (the defaults)
        self.mha("mha2nd1st:rope=0,causal=0,heads=3")
        self.mha("mha2nd1st:bias=0,heads=2,rope_theta=50,bias_temperature=divisor", dim=20)

    def test_light2nd1st(self):
        self.light("light2nd1st")
        self.light("light2nd1st:rope=0,causal=0,heads=3")
        self.light("light2nd1st:bias=0,heads=2,rope_theta=50,tau=0.3", dim=20)


# ----------------------------------------------------------------------------------------------------------
# The energy framework


def energy_randomise(name, p, generator):
    if name == "gate.bias":  # forgetting gates around sigmoid(1.5) so the product decays visibly
        return 1.5 + torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5
    if name in ("w1.weight", "w2.weight"):
        return torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.6 / math.sqrt(p.shape[1])
    return default_randomise(name, p, generator)


class EnergyAgainstReference(ReferenceCase):
    tearDownClass = _print_max_diff

    def check(self, spec, dim=16, x_scale=1.0, **recipe):
        o = spec_options(spec)
        kw = dict(heads=int(o.get("heads", 4)), local=o.get("local", "neg_inner"),
                  global_=o.get("global", "helmholtz"), optimizer=o.get("optimizer", "gd"),
                  steps=int(o.get("steps", 1)), eta=float(o.get("eta", 1)), beta=float(o.get("beta", 0.9)),
                  temperature=float(o.get("temperature", 0)), p_exp=float(o.get("p", 1.5)),
                  delta=float(o.get("delta", 1)))
        self.compare(spec, dim, 16, lambda x, w: ref.energy_reference(x, w, **kw), randomise=energy_randomise,
                     x_scale=x_scale)

    def test_softmax_attention_recipe(self):  # neg_inner + helmholtz + gd: softmax attention as a GD step
        self.check("energy")
        self.check("energy:steps=2,eta=0.7,heads=2,temperature=1.3", dim=12)

    def test_mha2nd1st_recipe(self):  # helmholtz + half_sq_distance + newton_taylor
        self.check("energy:local=half_sq_distance,optimizer=newton_taylor,steps=2,eta=0.6,temperature=1.7")

    def test_exact_newton_forward(self):
        """optimizer=newton has no backward (docs/energy.md): its forward against the range-space Newton step
        W1^+ A^-1 u (the autograd Hessian's pseudo-inverse agrees to ~1e-15 here; docs/energy.md tests 1e-7)."""
        torch.manual_seed(1)
        generator = torch.Generator().manual_seed(1)
        spec = "energy:local=half_sq_distance,optimizer=newton,steps=2,eta=0.5,temperature=2"
        mixer = seqmix.Mixer(spec, 16, 16).double()
        params = dict(mixer.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(energy_randomise(name, p, generator))
            weights = RecordingDict({n: p.detach().clone() for n, p in params.items()})
            for T in LENGTHS:
                x = torch.randn(B, T, 16, generator=generator, dtype=torch.float64)
                expected = ref.energy_reference(x, weights, heads=4, local="half_sq_distance", optimizer="newton",
                                                steps=2, eta=0.5, temperature=2.0)
                actual = mixer(x)
                torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL)
                self.assertGreater(expected.abs().max().item(), 1e-3)
                MAX_DIFF[spec] = max(MAX_DIFF.get(spec, 0.0), (actual - expected).abs().max().item())
        self.assertEqual(weights.used, set(mixer.state_dict().keys()))

    def test_gated_linear_recipe(self):  # abs_inner + gated_sum_squares + nesterov
        self.check("energy:local=abs_inner,global=gated_sum_squares,optimizer=nesterov,steps=3,eta=0.3,beta=0.6",
                   x_scale=0.7)

    def test_momentum_on_other_energies(self):
        self.check("energy:local=lp,global=neg_sum_squares,optimizer=momentum,steps=2,eta=0.05,beta=0.5,p=1.7",
                   x_scale=0.5)
        self.check("energy:local=huber,optimizer=momentum,steps=2,delta=0.8,heads=2", dim=12)


if __name__ == "__main__":
    unittest.main()
