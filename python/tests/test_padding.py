"""Padding that never leaks, and documented ranges that are checked. Every op that takes a mask (attention,
fem_softmax_read, aft, fem_aft_read, aft_step): whatever a masked position holds (NaN, +inf, -inf or ordinary
numbers), the outputs at real positions are bitwise the same, and so are the gradients at real positions when
the padded outputs get no upstream gradient (a loss that ignores padding); nothing is NaN or inf. A poison gives
exactly what zeros there give. FEM's beta and MHA2nd1st's temperature must be > 0, and a decode state must have
its inputs' dtype."""
import math
import unittest

import torch

import seqmix

torch.manual_seed(0)
D = torch.float64
B, T, H, DK, DV, C = 2, 8, 2, 3, 4, 5
# Leading, inner and trailing padding; the second row's first query has no real key before it.
MASK = torch.tensor([[True, True, True, True, True, False, False, False],
                     [False, True, True, False, True, True, True, False]])
POISONS = (math.nan, math.inf, -math.inf)


def filled(x, mask, value):
    """x with its masked positions (mask false, over the first two axes) set to value."""
    shape = mask.shape + (1,) * (x.dim() - 2)
    return x.masked_fill(~mask.view(shape), value)


class MaskedPositionsContributeNothing(unittest.TestCase):
    def compare(self, op, inputs, mask=MASK, finite_tolerance=0.0):
        """op(*inputs) with ordinary numbers at the masked positions against the same with zeros and each poison.
        Outputs are [B,T,...] (their padded rows are the masked positions)."""
        def run(args):
            leaves = [a.detach().clone().requires_grad_() for a in args]
            outs = op(*leaves)
            outs = outs if isinstance(outs, tuple) else (outs,)
            upstream = [filled(torch.ones_like(o), mask, 0.0) for o in outs]  # a loss that ignores padding
            torch.autograd.backward(list(outs), upstream)
            return outs, [leaf.grad for leaf in leaves]

        def real(x):
            return x[mask]

        ref_outs, ref_grads = run(inputs)
        zero_outs, zero_grads = run([filled(a, mask, 0.0) for a in inputs])
        for poison in POISONS:
            with self.subTest(poison=poison):
                outs, grads = run([filled(a, mask, poison) for a in inputs])
                for o, r, z in zip(outs, ref_outs, zero_outs):
                    self.assertTrue(torch.isfinite(o).all())
                    torch.testing.assert_close(real(o), real(r), atol=finite_tolerance, rtol=finite_tolerance)
                    torch.testing.assert_close(o, z, atol=0, rtol=0)
                for g, r, z in zip(grads, ref_grads, zero_grads):
                    self.assertTrue(torch.isfinite(g).all())
                    torch.testing.assert_close(real(g), real(r), atol=finite_tolerance, rtol=finite_tolerance)
                    torch.testing.assert_close(g, z, atol=0, rtol=0)

    def test_attention(self):
        q, k, v = torch.randn(B, T, H, DK, dtype=D), torch.randn(B, T, H, DK, dtype=D), torch.randn(B, T, H, DV, dtype=D)
        for impl in seqmix.op_impls("attention"):
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    self.compare(lambda q, k, v: seqmix.attention(q, k, v, causal, key_mask=MASK, impl=impl), (q, k, v))

    def test_fem_softmax_read(self):
        q, k, v = torch.randn(B, T, H, DK, dtype=D), torch.randn(B, T, H, DK, dtype=D), torch.randn(B, T, H, DV, dtype=D)
        beta = torch.rand(H * DV, dtype=D) + 0.5
        for impl in seqmix.op_impls("fem_softmax_read"):
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    # The fused kernel's per-channel stabilising shift is a max over the values of the keys a
                    # query block shares, masked ones included: a finite value there moves the real outputs by
                    # rounding only (a poison, made zero, moves nothing: compared exactly above).
                    self.compare(lambda q, k, v: seqmix.fem_softmax_read(q, k, v, beta, causal=causal, key_mask=MASK,
                                                                         impl=impl), (q, k, v),
                                 finite_tolerance=1e-13 if impl == "fused" else 0.0)

    def test_aft_and_its_fem_read(self):
        k, v = torch.randn(B, T, C, dtype=D) * 2, torch.randn(B, T, C, dtype=D)
        beta = torch.rand(C, dtype=D) + 0.5
        for impl in seqmix.op_impls("aft"):
            with self.subTest(op="aft", impl=impl):
                self.compare(lambda k, v: seqmix.aft(k, v, MASK, impl), (k, v))
            with self.subTest(op="fem_aft_read", impl=impl):
                self.compare(lambda k, v: seqmix.fem_aft_read(k, v, beta, mask=MASK, impl=impl), (k, v))

    def test_aft_step(self):
        k, v = torch.randn(B, T, C, dtype=D), torch.randn(B, T, C, dtype=D)

        def steps(k, v):
            state, nums, dens = seqmix.aft_initial_state(B, C, D), [], []
            for t in range(T):
                num, den, state = seqmix.aft_step(k[:, t], v[:, t], state, MASK[:, t])
                nums.append(num)
                dens.append(den)
            return torch.cat(nums, 1), torch.cat(dens, 1)  # [B,T,C] each
        self.compare(steps, (k, v))


class DocumentedRangesAreChecked(unittest.TestCase):
    def test_fem_beta_must_be_positive(self):
        q, k, v = torch.randn(1, 4, 1, 2, dtype=D), torch.randn(1, 4, 1, 2, dtype=D), torch.randn(1, 4, 1, 3, dtype=D)
        for beta in (torch.tensor([1.0, 0.0, 1.0], dtype=D), torch.tensor([1.0, -2.0, 1.0], dtype=D),
                     torch.tensor([1.0, math.nan, 1.0], dtype=D)):
            for impl in seqmix.op_impls("fem_softmax_read"):
                with self.subTest(beta=beta.tolist(), impl=impl):
                    with self.assertRaisesRegex(RuntimeError, "beta must be > 0 in every entry"):
                        seqmix.fem_softmax_read(q, k, v, beta, impl=impl)
        with self.assertRaisesRegex(RuntimeError, "beta must be > 0"):
            seqmix.fem_linear_read(q.abs(), k.abs(), v, torch.tensor([1.0, 0.0, 1.0], dtype=D))

    def test_mha2nd1st_temperature_must_be_positive(self):
        q, k = torch.randn(1, 4, 2, 3, dtype=D), torch.randn(1, 4, 2, 3, dtype=D)
        for impl in seqmix.op_impls("mha2nd1st_read"):
            with self.subTest(impl=impl):
                with self.assertRaisesRegex(RuntimeError, "temperature must be > 0"):
                    seqmix.mha2nd1st_read(q, k, torch.tensor([1.0, 0.0], dtype=D), torch.ones(2, dtype=D), impl=impl)

    def test_decode_state_must_have_the_inputs_dtype(self):
        f32 = torch.float32
        q_t, v_t = torch.rand(B, H, DK, dtype=D), torch.randn(B, H, DV, dtype=D)
        la_state = seqmix.linear_attention_initial_state(B, H, DK, DV, f32)
        message = "the decode state is Float but the inputs are Double"
        with self.assertRaisesRegex(RuntimeError, message):
            seqmix.linear_attention_step(q_t, q_t, v_t, la_state)
        with self.assertRaisesRegex(RuntimeError, message):
            seqmix.gla_step(q_t, q_t, v_t, -torch.rand(B, H, dtype=D), la_state)
        with self.assertRaisesRegex(RuntimeError, message):
            seqmix.aft_step(torch.randn(B, C, dtype=D), torch.randn(B, C, dtype=D), seqmix.aft_initial_state(B, C, f32))
        with self.assertRaisesRegex(RuntimeError, message):
            seqmix.ssm_step(torch.randn(B, C, dtype=D), torch.rand(B, C, dtype=D), -torch.rand(C, 2, dtype=D),
                            torch.rand(B, 2, dtype=D), torch.rand(B, 2, dtype=D), seqmix.ssm_initial_state(B, C, 2, f32))
        with self.assertRaisesRegex(RuntimeError, message):
            seqmix.ela_step(q_t, q_t, v_t, seqmix.ela_initial_state(B, H, DK, DV, "hadamard_exp", f32))
        # A reduced-precision input with a float32 state is the documented mixed case: both compute in float32.
        seqmix.linear_attention_step(q_t.bfloat16(), q_t.bfloat16(), v_t.bfloat16(), la_state)


if __name__ == "__main__":
    unittest.main()
