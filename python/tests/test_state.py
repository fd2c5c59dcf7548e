"""State handoff in flash-linear-attention's style for the linear-family ops (linear_attention, gla per head and per
key, delta_rule, ssm_scan, aft, ela on every kernel): a sequence prefilled in chunks, each chunk starting from the
state the previous one returned, equals one long forward; the final state equals the decode steps'; gradients
reach the initial state (gradcheck); scale multiplies q. LRNN-decay is gla with unit features of width 1, tested as
such."""
import unittest

import torch

import seqmix

torch.manual_seed(0)
D = torch.float64
B, T, H, DK, DV, C, N = 2, 70, 2, 3, 4, 3, 2  # 70 positions: across the fused scans' 64-position chunks
CUTS = (0, 23, 64, 65, 70)


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def inputs(T=T):
    """q, k, v and the op's extra input (log decay / beta), fp64."""
    q, k = torch.rand(B, T, H, DK, dtype=D) + 0.1, torch.rand(B, T, H, DK, dtype=D) + 0.1
    v = torch.randn(B, T, H, DV, dtype=D)
    return {"linear_attention": (q, k, v), "gla": (q, k, v, -torch.rand(B, T, H, dtype=D) * 0.2),
            "gla:per_key": (q, k, v, -torch.rand(B, T, H, DK, dtype=D) * 0.3),
            # LRNN-decay: GLA with unit features q = k = 1 of width 1 (the lrnn_decay prior's read).
            "gla:lrnn_decay": (torch.ones(B, T, H, 1, dtype=D), torch.ones(B, T, H, 1, dtype=D), v,
                               -torch.rand(B, T, H, dtype=D) * 0.2),
            "delta_rule": (unit(torch.randn(B, T, H, DK, dtype=D)), unit(torch.randn(B, T, H, DK, dtype=D)), v,
                           torch.sigmoid(torch.randn(B, T, H, dtype=D)))}


def ssm_inputs(T=T):
    return (torch.randn(B, T, C, dtype=D), torch.rand(B, T, C, dtype=D) + 0.1, -torch.rand(C, N, dtype=D) - 0.1,
            torch.rand(B, T, N, dtype=D), torch.rand(B, T, N, dtype=D))


def op_of(label):
    """The seqmix function of an inputs() label ("gla:per_key" is gla)."""
    return getattr(seqmix, label.split(":")[0])


def aft_inputs(T=T):
    """Keys that jump (the running max rises inside and across chunks), padding at and around the cuts."""
    k = torch.randn(B, T, C, dtype=D) * 2
    k[:, min(30, T // 2)] += 6
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, 20:26] = False
    mask[1, 62:67] = False
    mask[1, 0] = False
    return k, torch.randn(B, T, C, dtype=D), mask


def ela_inputs(T=T):
    return torch.randn(B, T, H, DK, dtype=D), torch.randn(B, T, H, DK, dtype=D) * 2, torch.randn(B, T, H, DV, dtype=D)


ELA_KERNELS = ("hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude")


def cut(args, a, b):
    return tuple(x[:, a:b] for x in args)


class ChunkedPrefillEqualsOneForward(unittest.TestCase):
    def assert_chunks_equal_one_call(self, call, per_position):
        """call(*inputs, initial_state=, output_final_state=True) -> (*outputs, state), with per_position the
        inputs that are cut along time (dim 1): the outputs of CUTS' chunks, each continuing from the state the
        chunk before returned, and the last state equal one call on the whole sequence."""
        *whole, final = call(*per_position, initial_state=None, output_final_state=True)
        state, parts = None, []
        for a, b in zip(CUTS, CUTS[1:]):
            *outputs, state = call(*cut(per_position, a, b), initial_state=state, output_final_state=True)
            parts.append(outputs)
        for i, expected in enumerate(whole):
            torch.testing.assert_close(torch.cat([p[i] for p in parts], 1), expected, atol=1e-10, rtol=1e-10)
        as_tuple = (lambda x: x if isinstance(x, tuple) else (x,))
        for got, expected in zip(as_tuple(state), as_tuple(final)):
            torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)

    def test_linear_family(self):
        for name, args in inputs().items():
            op = op_of(name)
            for impl in seqmix.op_impls(name.split(":")[0]):
                with self.subTest(op=name, impl=impl):
                    self.assert_chunks_equal_one_call(lambda *x, **kw: op(*x, impl=impl, **kw), args)
                    self.assertEqual(len(op(*args, impl=impl)), 2)  # without a state: the read alone

    def test_aft(self):
        k, v, mask = aft_inputs()
        for impl in seqmix.op_impls("aft"):
            with self.subTest(impl=impl, mask=False):
                self.assert_chunks_equal_one_call(lambda k, v, **kw: seqmix.aft(k, v, None, impl, **kw), (k, v))
            with self.subTest(impl=impl, mask=True):
                self.assert_chunks_equal_one_call(lambda k, v, m, **kw: seqmix.aft(k, v, m, impl, **kw), (k, v, mask))

    def test_ela(self):
        q, k, v = ela_inputs()
        for kernel in ELA_KERNELS:
            for impl in seqmix.op_impls("ela"):
                with self.subTest(kernel=kernel, impl=impl):
                    self.assert_chunks_equal_one_call(
                        lambda *x, **kw: seqmix.ela(*x, kernel, impl=impl, **kw), (q, k, v))
                    self.assertIsInstance(seqmix.ela(q, k, v, kernel, impl=impl), torch.Tensor)

    def test_ssm_scan(self):
        u, delta, A, b, c = ssm_inputs()
        for impl in seqmix.op_impls("ssm_scan"):
            with self.subTest(impl=impl):
                self.assert_chunks_equal_one_call(
                    lambda u, delta, b, c, **kw: seqmix.ssm_scan(u, delta, A, b, c, impl=impl, **kw), (u, delta, b, c))


class FinalStateEqualsTheDecodeSteps(unittest.TestCase):
    def test_linear_family(self):
        for name, args in inputs(T=9).items():
            state = seqmix.linear_attention_initial_state(B, H, args[0].shape[-1], DV, D)
            for t in range(9):
                step = getattr(seqmix, name.split(":")[0] + "_step")
                _, _, state = step(*(x[:, t] for x in args), state)
            with self.subTest(op=name):
                _, _, final = op_of(name)(*args, output_final_state=True)
                for s, f in zip(state, final):
                    torch.testing.assert_close(f, s, atol=1e-12, rtol=1e-10)

    def test_aft(self):
        k, v, mask = aft_inputs(T=9)
        mask[0, 3:5] = False
        state = seqmix.aft_initial_state(B, C, D)
        for t in range(9):
            _, _, state = seqmix.aft_step(k[:, t], v[:, t], state, mask[:, t])
        _, _, final = seqmix.aft(k, v, mask, output_final_state=True)
        for s, f in zip(state, final):
            torch.testing.assert_close(f, s, atol=1e-12, rtol=1e-10)

    def test_ela(self):
        q, k, v = ela_inputs(T=9)
        for kernel in ELA_KERNELS:
            with self.subTest(kernel=kernel):
                state = seqmix.ela_initial_state(B, H, DK, DV, kernel, D)
                for t in range(9):
                    _, state = seqmix.ela_step(q[:, t], k[:, t], v[:, t], state, kernel)
                _, final = seqmix.ela(q, k, v, kernel, output_final_state=True)
                for s, f in zip(state, final):
                    torch.testing.assert_close(f, s, atol=1e-12, rtol=1e-10)

    def test_ssm_scan(self):
        u, delta, A, b, c = ssm_inputs(T=9)
        state = seqmix.ssm_initial_state(B, C, N, D)
        for t in range(9):
            _, state = seqmix.ssm_step(u[:, t], delta[:, t], A, b[:, t], c[:, t], state)
        _, final = seqmix.ssm_scan(u, delta, A, b, c, output_final_state=True)
        torch.testing.assert_close(final, state, atol=1e-12, rtol=1e-10)


class GradientsReachTheInitialState(unittest.TestCase):
    def test_gradcheck(self):
        small = {name: tuple(x[:, :5].detach().clone().requires_grad_() for x in args)
                 for name, args in inputs().items()}
        for name, args in small.items():
            op = op_of(name)
            dk = args[0].shape[-1]
            kv = (torch.randn(B, H, dk, DV, dtype=D) * 0.3).requires_grad_()
            k_sum = (torch.rand(B, H, dk, dtype=D) + 0.5).requires_grad_()
            for impl in seqmix.op_impls(name.split(":")[0]):
                with self.subTest(op=name, impl=impl):
                    def f(*xs):
                        n, d, (s, z) = op(*xs[:-2], impl=impl, initial_state=xs[-2:], output_final_state=True)
                        return n, d, s, z
                    self.assertTrue(torch.autograd.gradcheck(f, (*args, kv, k_sum)))
        # AFT and ELA from the state a real prefix left (a state's sums and running max belong together).
        k, v, mask = aft_inputs(T=9)
        _, _, state = seqmix.aft(k[:, :4], v[:, :4], mask[:, :4], output_final_state=True)
        aft_args = tuple(x.detach().clone().requires_grad_() for x in (k[:, 4:], v[:, 4:], *state))
        for impl in seqmix.op_impls("aft"):
            with self.subTest(op="aft", impl=impl):
                def f(k, v, *s):
                    n, d, final = seqmix.aft(k, v, mask[:, 4:], impl, initial_state=s, output_final_state=True)
                    return n, d, *final
                self.assertTrue(torch.autograd.gradcheck(f, aft_args))
        q, k, v = ela_inputs(T=9)
        for kernel in ("hadamard_exp", "sum_sq_euclidean"):
            _, state = seqmix.ela(q[:, :4], k[:, :4], v[:, :4], kernel, output_final_state=True)
            kept = state if kernel == "hadamard_exp" else state[:2]  # the polynomial kernels keep no key_max
            ela_args = tuple(x.detach().clone().requires_grad_() for x in (q[:, 4:], k[:, 4:], v[:, 4:], *kept))
            for impl in seqmix.op_impls("ela"):
                with self.subTest(op="ela", kernel=kernel, impl=impl):
                    def f(q, k, v, *s):
                        y, final = seqmix.ela(q, k, v, kernel, impl=impl, output_final_state=True,
                                              initial_state=s if len(s) == 3 else (*s, None))
                        return (y, *(x for x in final if x.numel()))
                    self.assertTrue(torch.autograd.gradcheck(f, ela_args))
        u, delta, A, b, c = (x[:, :5] if x.dim() == 3 else x for x in ssm_inputs())
        ssm_args = tuple(x.detach().clone().requires_grad_() for x in (u, delta, A, b, c))
        h0 = torch.randn(B, C, N, dtype=D).requires_grad_()
        for impl in seqmix.op_impls("ssm_scan"):
            with self.subTest(op="ssm_scan", impl=impl):
                self.assertTrue(torch.autograd.gradcheck(
                    lambda *xs: seqmix.ssm_scan(*xs[:-1], impl=impl, initial_state=xs[-1], output_final_state=True),
                    (*ssm_args, h0)))


class ScaleAndBadStates(unittest.TestCase):
    def test_scale_multiplies_q(self):
        q, k, v, a = inputs(T=9)["gla"]
        for name, extra in (("linear_attention", ()), ("gla", (a,))):
            op = getattr(seqmix, name)
            for got, want in zip(op(q, k, v, *extra, scale=0.25), op(q * 0.25, k, v, *extra)):
                torch.testing.assert_close(got, want, atol=0, rtol=0)
        torch.testing.assert_close(seqmix.ela(q, k, v, scale=0.25), seqmix.ela(q * 0.25, k, v), atol=0, rtol=0)

    def test_bad_states_are_one_line_errors(self):
        q, k, v = inputs(T=4)["linear_attention"]
        kv, k_sum = seqmix.linear_attention_initial_state(B, H, DK, DV, D)
        with self.assertRaisesRegex(RuntimeError, "give both kv and k_sum"):
            torch.ops.seqmix.linear_attention(q, k, v, True, "fused", None, kv, None, False)
        with self.assertRaisesRegex(RuntimeError, r"initial kv must be \[B,H,dk,dv\]"):
            seqmix.linear_attention(q, k, v, initial_state=(kv[:, :1], k_sum))
        with self.assertRaisesRegex(RuntimeError, "needs causal=True"):
            seqmix.linear_attention(q, k, v, causal=False, output_final_state=True)
        with self.assertRaisesRegex(RuntimeError, "initial state must have q's dtype"):
            seqmix.gla(q, k, v, -torch.rand(B, 4, H, dtype=D), initial_state=(kv.float(), k_sum.float()))
        k_aft, v_aft, _ = aft_inputs(T=4)
        aft_state = seqmix.aft_initial_state(B, C, D)
        with self.assertRaisesRegex(RuntimeError, "aft: give all three of the initial state"):
            seqmix.aft(k_aft, v_aft, initial_state=(aft_state[0], aft_state[1], None))
        with self.assertRaisesRegex(RuntimeError, r"aft: the initial key_max must be \[B,C\]"):
            seqmix.aft(k_aft, v_aft, initial_state=(*aft_state[:2], aft_state[2][:1]))
        qe, ke, ve = ela_inputs(T=4)
        hadamard = seqmix.ela_initial_state(B, H, DK, DV, "hadamard_exp", D)
        with self.assertRaisesRegex(RuntimeError, "ela: a state .* needs causal=True"):
            seqmix.ela(qe, ke, ve, causal=False, output_final_state=True)
        with self.assertRaisesRegex(RuntimeError, "needs the initial state's key_max"):
            seqmix.ela(qe, ke, ve, initial_state=(hadamard[0], hadamard[1], None))
        with self.assertRaisesRegex(RuntimeError, "keeps no key_max"):
            seqmix.ela(qe, ke, ve, "sum_sq_euclidean",
                       initial_state=(*seqmix.ela_initial_state(B, H, DK, DV, "sum_sq_euclidean", D)[:2], hadamard[2]))
        with self.assertRaisesRegex(RuntimeError, "a per-key log_decay must be"):
            seqmix.gla(q, k, v, -torch.rand(B, 4, H, DK + 1, dtype=D))
        with self.assertRaisesRegex(RuntimeError, r"ssm_scan: the initial state must be \[B,C,N\]"):
            seqmix.ssm_scan(*ssm_inputs(T=4), initial_state=torch.zeros(B, C, N + 1, dtype=D))


if __name__ == "__main__":
    unittest.main()
