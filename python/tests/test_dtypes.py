"""Every op of torch.ops.seqmix in bfloat16 and float16, and under torch.autocast.

An op given reduced-precision tensors computes in float32 and returns its outputs in the input dtype (decode
states, the outputs named like an input, keep that input's dtype). So on inputs already rounded to bf16/fp16
it must give exactly the float32 result rounded once, outputs and gradients alike: the tolerance is zero."""
import unittest
import warnings

import torch

import seqmix
from op_samples import (B, DK, DV, F32, H, SAMPLES, T, WITHOUT_TENSOR_INPUTS, floating, ops, positive, randn, schema,
                        state_inputs, table_ops)

torch.manual_seed(0)


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
            if got is None:  # an output only given on request (a final state)
                self.assertIsNone(want, r)
                continue
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


class OddTensors(unittest.TestCase):
    """Sparse, quantized, nested and complex tensors are one line naming the op and the argument, from every operator
    (checked where every operator starts, before any kernel), not the dispatcher's pages about a backend."""

    @staticmethod
    def variants(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized and nested tensors warn that their APIs change
            return {
                "a sparse tensor": x.detach().to_sparse(),
                "a quantized tensor": torch.quantize_per_tensor(x.detach().float(), 0.1, 0, torch.qint8),
                "a nested tensor": torch.nested.nested_tensor([row for row in x.detach()]),
                "a complex tensor": x.detach().to(torch.complex64),
            }

    def test_every_operator_names_the_argument(self):
        for name in sorted(SAMPLES):
            sample = SAMPLES[name]()
            arguments = [a.name for a in schema(name).arguments]
            position = next(i for i, x in enumerate(sample) if floating(x) and x.dim() >= 1)
            for kind, odd in self.variants(sample[position]).items():
                with self.subTest(op=name, argument=arguments[position], kind=kind):
                    args = list(sample)
                    args[position] = odd
                    with self.assertRaises(RuntimeError) as raised:
                        getattr(ops(), name)(*args)
                    message = str(raised.exception)
                    self.assertEqual(message.count("\n"), 0, message[:500])
                    self.assertIn(f"{name}: {arguments[position]} is {kind}", message)


if __name__ == "__main__":
    unittest.main()
