"""Every op of torch.ops.seqmix in bfloat16 and float16, and under torch.autocast.

An op given reduced-precision tensors computes in float32 and returns its outputs in the input dtype (decode
states, the outputs named like an input, keep that input's dtype). So on inputs already rounded to bf16/fp16
it must give exactly the float32 result rounded once, outputs and gradients alike: the tolerance is zero."""
import unittest

import torch

import seqmix

torch.manual_seed(0)
B, T, H, DK, DV, C, N = 2, 5, 2, 3, 4, 3, 2
F32 = torch.float32


def randn(*shape, scale=1.0):
    return torch.randn(*shape) * scale


def positive(*shape):
    return torch.rand(*shape) + 0.1


def unit(*shape):
    x = torch.randn(*shape)
    return x / x.norm(dim=-1, keepdim=True)


def ops():
    return torch.ops.seqmix


# One call of each operator with float32 inputs (positional, in the schema's order). Step ops start from the
# initial state their family gives.
SAMPLES = {
    "attention": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "relu_attention": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "normalised_read": lambda: (randn(B, T, H, DV), positive(B, T, H), 1e-6),
    "fem_softmax_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV), positive(H * DV)),
    "fem_scale_values": lambda: (randn(B, T, C), positive(C), 1.0),
    "fem_restore": lambda: (positive(B, T, C), torch.tensor(2.0), positive(C)),
    "linear_attention": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV)),
    "linear_attention_step": lambda: (positive(B, H, DK), positive(B, H, DK), randn(B, H, DV),
                                      *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "fem_linear_read": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), positive(H * DV)),
    "gla": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), -torch.rand(B, T, H)),
    "gla_step": lambda: (positive(B, H, DK), positive(B, H, DK), randn(B, H, DV), -torch.rand(B, H),
                         *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "fem_gla_read": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), -torch.rand(B, T, H),
                             positive(H * DV)),
    "delta_rule": lambda: (unit(B, T, H, DK), unit(B, T, H, DK), randn(B, T, H, DV), torch.rand(B, T, H)),
    "delta_rule_step": lambda: (unit(B, H, DK), unit(B, H, DK), randn(B, H, DV), torch.rand(B, H),
                                *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "aft": lambda: (randn(B, T, C), randn(B, T, C)),
    "aft_step": lambda: (randn(B, C), randn(B, C), *ops().aft_initial_state(B, C, None)),
    "fem_aft_read": lambda: (randn(B, T, C), randn(B, T, C), positive(C)),
    "ssm_scan": lambda: (randn(B, T, C), positive(B, T, C), -positive(C, N), positive(B, T, N), positive(B, T, N)),
    "ssm_step": lambda: (randn(B, C), positive(B, C), -positive(C, N), positive(B, N), positive(B, N),
                         torch.zeros(B, C, N)),
    "fem_ssm_read": lambda: (randn(B, T, C), positive(B, T, C), -positive(C, N), positive(B, T, N), positive(B, T, N),
                             None, positive(C)),
    "ela": lambda: (randn(B, T, H, DK, scale=0.5), randn(B, T, H, DK, scale=0.5), randn(B, T, H, DV)),
    "ela_step": lambda: (randn(B, H, DK, scale=0.5), randn(B, H, DK, scale=0.5), randn(B, H, DV),
                         *ops().ela_initial_state(B, H, DK, DV, "hadamard_exp", None)),
    "hypermlp_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "mha2nd1st_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), positive(H), randn(H)),
    "light2nd1st_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV), 0.8, randn(H)),
}
# Operators with no tensor inputs (they take a dtype) and the table itself.
WITHOUT_TENSOR_INPUTS = {"linear_attention_initial_state", "aft_initial_state", "ela_initial_state", "op_table"}


def schema(name):
    return getattr(ops(), name).default._schema


def state_inputs(name):
    """The argument positions of the decode states: the inputs an output of the same name continues."""
    s = schema(name)
    outputs = {r.name for r in s.returns}
    return {i for i, a in enumerate(s.arguments) if a.name in outputs}


def table_ops():
    return {op["name"]: op["impls"] for family in seqmix.op_table()["families"] for op in family["torch_ops"]}


def floating(x):
    return isinstance(x, torch.Tensor) and x.is_floating_point()


class ReducedPrecision(unittest.TestCase):
    def test_every_operator_has_a_sample(self):
        self.assertEqual(set(SAMPLES) | WITHOUT_TENSOR_INPUTS, set(table_ops()))

    def run_op(self, name, args, impl):
        return getattr(ops(), name)(*args, **({"impl": impl} if impl else {}))

    def check(self, name, impl, dtype):
        sample = SAMPLES[name]()
        states = state_inputs(name)
        # The reduced inputs, and the same values in float32 for the reference.
        low = [x.to(dtype) if floating(x) and i not in states else x for i, x in enumerate(sample)]
        ref = [x.float() if floating(x) and i not in states else x for i, x in enumerate(low)]
        for x in low + ref:
            if floating(x):
                x.requires_grad_()
        out, expected = self.run_op(name, low, impl), self.run_op(name, ref, impl)
        out = out if isinstance(out, tuple) else (out,)
        expected = expected if isinstance(expected, tuple) else (expected,)
        returns = [r.name for r in schema(name).returns]
        arguments = [a.name for a in schema(name).arguments]
        grads_low, grads_ref = [], []
        for r, got, want in zip(returns, out, expected):
            if r in arguments:  # a decode state: its input's dtype, untouched
                self.assertEqual(got.dtype, sample[arguments.index(r)].dtype, r)
                torch.testing.assert_close(got, want, atol=0, rtol=0, equal_nan=True, msg=r)
                continue
            self.assertEqual(got.dtype, dtype, r)
            torch.testing.assert_close(got, want.to(dtype), atol=0, rtol=0, equal_nan=True, msg=r)
            g = torch.randn(got.shape).to(dtype)
            grads_low.append((got, g))
            grads_ref.append((want, g.float()))
        leaves_low = [x for i, x in enumerate(low) if floating(x) and i not in states]
        leaves_ref = [x for i, x in enumerate(ref) if floating(x) and i not in states]
        got = torch.autograd.grad([o for o, _ in grads_low], leaves_low, [g for _, g in grads_low], allow_unused=True)
        want = torch.autograd.grad([o for o, _ in grads_ref], leaves_ref, [g for _, g in grads_ref], allow_unused=True)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g is None, w is None, i)
            if g is not None:
                self.assertEqual(g.dtype, dtype)
                torch.testing.assert_close(g, w.to(dtype), atol=0, rtol=0, equal_nan=True, msg=f"gradient {i}")

    def test_bfloat16_and_float16_are_float32_rounded_once(self):
        for name, impls in sorted(table_ops().items()):
            if name in WITHOUT_TENSOR_INPUTS:
                continue
            for impl in impls or [None]:
                for dtype in (torch.bfloat16, torch.float16):
                    with self.subTest(op=name, impl=impl, dtype=dtype):
                        self.check(name, impl, dtype)

    def test_a_bfloat16_state_stays_bfloat16(self):
        kv, k_sum = (s.to(torch.bfloat16) for s in seqmix.linear_attention_initial_state(B, H, DK, DV))
        q, k, v = positive(B, H, DK), positive(B, H, DK), randn(B, H, DV)
        num, den, (kv, k_sum) = seqmix.linear_attention_step(q, k, v, (kv, k_sum))
        self.assertEqual((num.dtype, den.dtype), (F32, F32))  # the reads follow q, k, v
        self.assertEqual((kv.dtype, k_sum.dtype), (torch.bfloat16, torch.bfloat16))


class Autocast(unittest.TestCase):
    """A block of PyTorch layers around seqmix ops under torch.autocast("cpu", dtype=torch.bfloat16)."""

    def setUp(self):
        self.proj = torch.nn.Linear(8, 3 * H * DK)
        self.x = torch.randn(B, T, 8)

    def qkv(self):
        return self.proj(self.x).view(B, T, 3, H, DK).unbind(2)

    def test_ops_compute_in_float32_inside_autocast(self):
        """Inside autocast the op sees the bf16 projections and computes in float32: it equals the same op called
        on those bf16 tensors outside autocast, exactly (autocast would otherwise run the naive twins' matmuls
        in bf16)."""
        for name, impls in (("attention", seqmix.op_impls("attention")), ("gla", seqmix.op_impls("gla"))):
            for impl in impls:
                with self.subTest(op=name, impl=impl):
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        q, k, v = self.qkv()
                        self.assertEqual(q.dtype, torch.bfloat16)
                        extra = (torch.nn.functional.logsigmoid(q.sum(-1)),) if name == "gla" else ()
                        y = getattr(seqmix, name)(q, k, v, *extra, impl=impl)
                    y = y[0] if isinstance(y, tuple) else y
                    self.assertEqual(y.dtype, torch.bfloat16)
                    outside = getattr(seqmix, name)(q, k, v, *extra, impl=impl)
                    outside = outside[0] if isinstance(outside, tuple) else outside
                    torch.testing.assert_close(y, outside, atol=0, rtol=0)
                    y.float().square().sum().backward()
                    self.assertEqual(self.proj.weight.grad.dtype, F32)
                    self.assertTrue(torch.isfinite(self.proj.weight.grad).all())
                    self.proj.weight.grad = None

    def test_autocast_stays_close_to_float32(self):
        """The whole block in bf16 autocast against float32: within 3e-2 of the output's scale (bf16 keeps 8 bits)."""
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = seqmix.attention(*self.qkv())
        exact = seqmix.attention(*self.qkv())
        err = (y.float() - exact).abs().max() / exact.abs().max()
        self.assertLess(err.item(), 3e-2)


if __name__ == "__main__":
    unittest.main()
