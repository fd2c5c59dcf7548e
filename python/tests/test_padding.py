"""Padding that never leaks, and documented ranges that are checked. Every op that takes a mask (attention,
fem_softmax_read, aft, fem_aft_read, aft_step): whatever a masked position holds (NaN, +inf, -inf or ordinary
numbers), the outputs at real positions are bitwise the same, and so are the gradients at real positions when
the padded outputs get no upstream gradient (a loss that ignores padding); nothing is NaN or inf. A poison gives
exactly what zeros there give. A NaN or inf at an unmasked key position t changes no output before t (nor, packed,
another sequence's). FEM's beta and MHA2nd1st's temperature must be > 0, and a decode state must have its inputs'
dtype."""
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


class NonFiniteValuesStayCausal(unittest.TestCase):
    """A NaN or inf at key position t changes no output before t, for every causal op and impl (the kernels'
    zero weights would multiply it in, 0 x NaN; the ops recompute the outputs before it from the finite prefix),
    and, packed, no other sequence's outputs: they equal the clean ones. (Gradients are not covered: the backward
    of the full call multiplies its zero upstream gradients by the NaN, and autograd sums that in.)"""
    LENGTH, AT = 150, 100  # across the kernels' 64- and 96-position blocks

    def check(self, name, op, inputs, key_side, cu_seqlens=None):
        clean = op(*inputs)
        clean = clean if isinstance(clean, tuple) else (clean,)
        for i in key_side:
            for poison in POISONS:
                with self.subTest(op=name, input=i, poison=poison):
                    poisoned = [x.clone() for x in inputs]
                    poisoned[i][:, self.AT] = poison
                    out = op(*poisoned)
                    out = out if isinstance(out, tuple) else (out,)
                    # Unpacked: positions before AT; packed: every sequence but the one holding AT (lengths below).
                    keep = (slice(0, self.AT) if cu_seqlens is None else
                            torch.cat([torch.arange(0, 60), torch.arange(110, self.LENGTH)]))
                    for o, c in zip(out, clean):
                        self.assertTrue(torch.isfinite(o[:, keep]).all())
                        torch.testing.assert_close(o[:, keep], c[:, keep], atol=1e-12, rtol=1e-12)

    def test_every_causal_op(self):
        L = self.LENGTH
        q, k, v = torch.randn(B, L, H, DK, dtype=D), torch.randn(B, L, H, DK, dtype=D), torch.randn(B, L, H, DV, dtype=D)
        qp, kp = q.abs() + 0.1, k.abs() + 0.1
        a, beta = -torch.rand(B, L, H, dtype=D) * 0.3, torch.rand(H * DV, dtype=D) + 0.5
        temperature, bias_scale, tau = torch.rand(H, dtype=D) + 0.5, torch.randn(H, dtype=D), torch.rand(H, dtype=D)
        unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
        for impl in seqmix.op_impls("attention"):
            self.check(f"attention {impl}", lambda q, k, v: seqmix.attention(q, k, v, True, impl=impl), (q, k, v), (1, 2))
        for impl in ("fused", "naive"):
            self.check(f"linear_attention {impl}", lambda q, k, v: seqmix.linear_attention(q, k, v, True, impl),
                       (qp, kp, v), (1, 2))
            self.check(f"gla {impl}", lambda q, k, v, a: seqmix.gla(q, k, v, a, impl), (qp, kp, v, a), (1, 2, 3))
            self.check(f"fem_softmax_read {impl}", lambda q, k, v: seqmix.fem_softmax_read(q, k, v, beta, impl=impl),
                       (q, k, v), (1, 2))
            self.check(f"fem_linear_read {impl}", lambda q, k, v: seqmix.fem_linear_read(q, k, v, beta, impl=impl),
                       (qp, kp, v), (1, 2))
            for kernel in ("hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude"):
                self.check(f"ela {kernel} {impl}", lambda q, k, v: seqmix.ela(q, k, v, kernel, impl=impl), (q, k, v),
                           (1, 2))
            self.check(f"mha2nd1st_read {impl}",
                       lambda q, k: seqmix.mha2nd1st_read(q, k, temperature, bias_scale, True, impl), (q, k), (1,))
            self.check(f"light2nd1st_read {impl}", lambda q, k, v: seqmix.light2nd1st_read(q, k, v, 0.5, tau, True, impl),
                       (q, k, v), (1, 2))
            self.check(f"hypermlp_read {impl}", lambda q, k, v: seqmix.hypermlp_read(q, k, v, block=32, impl=impl),
                       (q, k, v), (1, 2))
        self.check("delta_rule", lambda q, k, v, b: seqmix.delta_rule(unit(q), unit(k), v, b),
                   (q, k, v, torch.rand(B, L, H, dtype=D)), (1, 2, 3))

    def test_packed_sequences(self):
        """Sequences [0, 60), [60, 110), [110, 150): a poison at 100 stays in the second, for every op with
        cu_seqlens."""
        L, cu = self.LENGTH, torch.tensor([0, 60, 110, 150])
        q, k, v = torch.randn(1, L, H, DK, dtype=D), torch.randn(1, L, H, DK, dtype=D), torch.randn(1, L, H, DV, dtype=D)
        qp, kp, a = q.abs() + 0.1, k.abs() + 0.1, -torch.rand(1, L, H, dtype=D) * 0.3
        kc, vc, u, dl = (torch.randn(1, L, C, dtype=D), torch.randn(1, L, C, dtype=D), torch.randn(1, L, C, dtype=D),
                         torch.rand(1, L, C, dtype=D) + 0.1)
        A, bs, cs = -torch.rand(C, 3, dtype=D) - 0.1, torch.rand(1, L, 3, dtype=D), torch.rand(1, L, 3, dtype=D)
        beta, temperature = torch.rand(H * DV, dtype=D) + 0.5, torch.rand(H, dtype=D) + 0.5
        bias_scale, tau = torch.randn(H, dtype=D), torch.rand(H, dtype=D)
        unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
        for impl in seqmix.op_impls("attention"):
            for causal in (True, False):
                self.check(f"attention {impl} causal={causal}",
                           lambda q, k, v: seqmix.attention(q, k, v, causal, impl=impl, cu_seqlens=cu), (q, k, v),
                           (1, 2), cu)
        for impl in ("fused", "naive"):
            for causal in (True, False):
                self.check(f"linear_attention {impl} causal={causal}",
                           lambda q, k, v: seqmix.linear_attention(q, k, v, causal, impl, cu_seqlens=cu), (qp, kp, v),
                           (1, 2), cu)
            self.check(f"gla {impl}", lambda q, k, v, a: seqmix.gla(q, k, v, a, impl, cu_seqlens=cu), (qp, kp, v, a),
                       (1, 2, 3), cu)
            self.check(f"ela {impl}", lambda q, k, v: seqmix.ela(q, k, v, "sum_sq_euclidean", impl=impl, cu_seqlens=cu),
                       (q, k, v), (1, 2), cu)
            self.check(f"aft {impl}", lambda k, v: seqmix.aft(k, v, None, impl, cu_seqlens=cu), (kc, vc), (0, 1), cu)
            self.check(f"ssm_scan {impl}", lambda u, dl, b, c: seqmix.ssm_scan(u, dl, A, b, c, impl, cu_seqlens=cu),
                       (u, dl, bs, cs), (0, 1, 2, 3), cu)
            self.check(f"fem_softmax_read {impl}",
                       lambda q, k, v: seqmix.fem_softmax_read(q, k, v, beta, impl=impl, cu_seqlens=cu), (q, k, v),
                       (1, 2), cu)
            self.check(f"fem_gla_read {impl}", lambda q, k, v, a: seqmix.fem_gla_read(q, k, v, a, beta, impl=impl,
                                                                                     cu_seqlens=cu),
                       (qp, kp, v, a), (1, 2, 3), cu)
            self.check(f"mha2nd1st_read {impl}", lambda q, k: seqmix.mha2nd1st_read(q, k, temperature, bias_scale,
                                                                                    True, impl, cu_seqlens=cu),
                       (q, k), (1,), cu)
            self.check(f"light2nd1st_read {impl}", lambda q, k, v: seqmix.light2nd1st_read(q, k, v, 0.5, tau, True,
                                                                                          impl, cu_seqlens=cu),
                       (q, k, v), (1, 2), cu)
            self.check(f"hypermlp_read {impl}", lambda q, k, v: seqmix.hypermlp_read(q, k, v, block=32, impl=impl,
                                                                                    cu_seqlens=cu),
                       (q, k, v), (1, 2), cu)
        self.check("delta_rule", lambda q, k, v, b: seqmix.delta_rule(unit(q), unit(k), v, b, cu_seqlens=cu),
                   (q, k, v, torch.rand(1, L, H, dtype=D)), (1, 2, 3), cu)


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
