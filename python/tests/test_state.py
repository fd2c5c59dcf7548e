"""State handoff in flash-linear-attention's style for the linear-family ops (linear_attention, gla, delta_rule,
ssm_scan): a sequence prefilled in chunks, each chunk starting from the state the previous one returned, equals
one long forward; the final state equals the decode steps'; gradients reach the initial state (gradcheck); scale
multiplies q."""
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
            "delta_rule": (unit(torch.randn(B, T, H, DK, dtype=D)), unit(torch.randn(B, T, H, DK, dtype=D)), v,
                           torch.sigmoid(torch.randn(B, T, H, dtype=D)))}


def ssm_inputs(T=T):
    return (torch.randn(B, T, C, dtype=D), torch.rand(B, T, C, dtype=D) + 0.1, -torch.rand(C, N, dtype=D) - 0.1,
            torch.rand(B, T, N, dtype=D), torch.rand(B, T, N, dtype=D))


def cut(args, a, b):
    return tuple(x[:, a:b] for x in args)


class ChunkedPrefillEqualsOneForward(unittest.TestCase):
    def test_linear_family(self):
        for name, args in inputs().items():
            op = getattr(seqmix, name)
            for impl in seqmix.op_impls(name):
                with self.subTest(op=name, impl=impl):
                    num, den, final = op(*args, impl=impl, output_final_state=True)
                    state, nums, dens = None, [], []
                    for a, b in zip(CUTS, CUTS[1:]):
                        n, d, state = op(*cut(args, a, b), impl=impl, initial_state=state, output_final_state=True)
                        nums.append(n)
                        dens.append(d)
                    torch.testing.assert_close(torch.cat(nums, 1), num, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(torch.cat(dens, 1), den, atol=1e-10, rtol=1e-10)
                    for s, f in zip(state, final):
                        torch.testing.assert_close(s, f, atol=1e-10, rtol=1e-10)
                    self.assertEqual(len(op(*args, impl=impl)), 2)  # without a state: the read alone

    def test_ssm_scan(self):
        args = ssm_inputs()
        for impl in seqmix.op_impls("ssm_scan"):
            with self.subTest(impl=impl):
                y, final = seqmix.ssm_scan(*args, impl=impl, output_final_state=True)
                state, ys = None, []
                for a, b in zip(CUTS, CUTS[1:]):
                    part = tuple(x[:, a:b] if x.dim() == 3 else x for x in args)  # A [C,N] is not per position
                    out, state = seqmix.ssm_scan(*part, impl=impl, initial_state=state, output_final_state=True)
                    ys.append(out)
                torch.testing.assert_close(torch.cat(ys, 1), y, atol=1e-10, rtol=1e-10)
                torch.testing.assert_close(state, final, atol=1e-10, rtol=1e-10)


class FinalStateEqualsTheDecodeSteps(unittest.TestCase):
    def test_linear_family(self):
        for name, args in inputs(T=9).items():
            state = seqmix.linear_attention_initial_state(B, H, DK, DV, D)
            for t in range(9):
                step = getattr(seqmix, name + "_step")
                _, _, state = step(*(x[:, t] for x in args), state)
            with self.subTest(op=name):
                _, _, final = getattr(seqmix, name)(*args, output_final_state=True)
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
        kv = (torch.randn(B, H, DK, DV, dtype=D) * 0.3).requires_grad_()
        k_sum = (torch.rand(B, H, DK, dtype=D) + 0.5).requires_grad_()
        for name, args in small.items():
            op = getattr(seqmix, name)
            for impl in seqmix.op_impls(name):
                with self.subTest(op=name, impl=impl):
                    def f(*xs):
                        n, d, (s, z) = op(*xs[:-2], impl=impl, initial_state=xs[-2:], output_final_state=True)
                        return n, d, s, z
                    self.assertTrue(torch.autograd.gradcheck(f, (*args, kv, k_sum)))
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
        with self.assertRaisesRegex(RuntimeError, r"ssm_scan: the initial state must be \[B,C,N\]"):
            seqmix.ssm_scan(*ssm_inputs(T=4), initial_state=torch.zeros(B, C, N + 1, dtype=D))


if __name__ == "__main__":
    unittest.main()
