"""Variable-length packed batches (cu_seqlens, flash-attn's and flash-linear-attention's convention): N sequences
concatenated in one row [1, total_T, ...]. For every op that takes cu_seqlens (attention, linear_attention, gla,
aft, ssm_scan and the FEM reads through the linear, GLA and AFT priors), every impl, causal or not: the
packed output equals each sequence run alone, and so do the gradients, over lengths of 1 and lengths that cross
the kernels' block boundaries (attention: 96 query and 256 key rows; GLA: 64-position chunks). Bad offsets are
one-line errors."""
import unittest

import torch

import seqmix

torch.manual_seed(0)
D = torch.float64
H, DK, DV, C = 2, 3, 4, 5
LENGTHS = (1, 70, 97, 1, 300, 5)  # across the 64-, 96- and 256-position blocks, and single positions


def offsets(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.long)


class PackedEqualsEachSequenceAlone(unittest.TestCase):
    def compare(self, packed_op, alone_op, inputs, lengths=LENGTHS, atol=1e-10):
        """packed_op(*inputs, cu_seqlens) against alone_op on each sequence's slice, outputs and gradients."""
        cu = offsets(lengths)

        def leaf(x):  # masks go in as they are
            return x.detach().clone().requires_grad_() if x.is_floating_point() else x
        leaves = [leaf(x) for x in inputs]
        packed = packed_op(*leaves, cu)
        packed = packed if isinstance(packed, tuple) else (packed,)
        weights = [torch.randn_like(o) for o in packed]
        sum((o * w).sum() for o, w in zip(packed, weights)).backward()
        for s in range(len(lengths)):
            a, b = cu[s].item(), cu[s + 1].item()
            parts = [leaf(x[:, a:b]) for x in inputs]
            alone = alone_op(*parts)
            alone = alone if isinstance(alone, tuple) else (alone,)
            sum((o * w[:, a:b]).sum() for o, w in zip(alone, weights)).backward()
            with self.subTest(sequence=s, length=b - a):
                for o, p in zip(alone, packed):
                    torch.testing.assert_close(p[:, a:b], o, atol=atol, rtol=1e-10)
                for part, whole in zip(parts, leaves):
                    if whole.is_floating_point():
                        torch.testing.assert_close(whole.grad[:, a:b], part.grad, atol=atol, rtol=1e-10)

    def test_attention(self):
        T = sum(LENGTHS)
        q, k, v = torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DV, dtype=D)
        for impl in seqmix.op_impls("attention"):
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    self.compare(lambda q, k, v, cu: seqmix.attention(q, k, v, causal, impl=impl, cu_seqlens=cu),
                                 lambda q, k, v: seqmix.attention(q, k, v, causal, impl=impl), (q, k, v))

    def test_linear_attention(self):
        T = sum(LENGTHS)
        q, k = torch.rand(1, T, H, DK, dtype=D) + 0.1, torch.rand(1, T, H, DK, dtype=D) + 0.1
        v = torch.randn(1, T, H, DV, dtype=D)
        for impl in seqmix.op_impls("linear_attention"):
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    self.compare(lambda q, k, v, cu: seqmix.linear_attention(q, k, v, causal, impl, cu_seqlens=cu),
                                 lambda q, k, v: seqmix.linear_attention(q, k, v, causal, impl), (q, k, v))

    def test_aft(self):
        T = sum(LENGTHS)
        k, v = torch.randn(1, T, C, dtype=D) * 2, torch.randn(1, T, C, dtype=D)
        mask = torch.rand(1, T) > 0.2  # padding inside the packed sequences too
        for impl in seqmix.op_impls("aft"):
            with self.subTest(impl=impl, mask=False):
                self.compare(lambda k, v, cu: seqmix.aft(k, v, None, impl, cu_seqlens=cu),
                             lambda k, v: seqmix.aft(k, v, None, impl), (k, v))
            with self.subTest(impl=impl, mask=True):
                self.compare(lambda k, v, m, cu: seqmix.aft(k, v, m, impl, cu_seqlens=cu),
                             lambda k, v, m: seqmix.aft(k, v, m, impl), (k, v, mask))

    def test_fem_reads_through_the_linear_priors(self):
        T = sum(LENGTHS)
        q, k = torch.rand(1, T, H, DK, dtype=D) + 0.1, torch.rand(1, T, H, DK, dtype=D) + 0.1
        v, beta = torch.randn(1, T, H, DV, dtype=D), torch.rand(H * DV, dtype=D) + 0.5
        a = -torch.rand(1, T, H, dtype=D) * 0.3
        k_aft, v_aft, beta_aft = torch.randn(1, T, C, dtype=D), torch.randn(1, T, C, dtype=D), torch.rand(C, dtype=D) + 0.5
        for impl in seqmix.op_impls("fem_linear_read"):
            for causal in (True, False):
                with self.subTest(op="fem_linear_read", impl=impl, causal=causal):
                    self.compare(lambda q, k, v, cu: seqmix.fem_linear_read(q, k, v, beta, causal=causal, impl=impl,
                                                                            cu_seqlens=cu),
                                 lambda q, k, v: seqmix.fem_linear_read(q, k, v, beta, causal=causal, impl=impl),
                                 (q, k, v))
        for impl in seqmix.op_impls("fem_gla_read"):
            with self.subTest(op="fem_gla_read", impl=impl):
                self.compare(lambda q, k, v, a, cu: seqmix.fem_gla_read(q, k, v, a, beta, impl=impl, cu_seqlens=cu),
                             lambda q, k, v, a: seqmix.fem_gla_read(q, k, v, a, beta, impl=impl), (q, k, v, a))
        for impl in seqmix.op_impls("fem_aft_read"):
            with self.subTest(op="fem_aft_read", impl=impl):
                self.compare(lambda k, v, cu: seqmix.fem_aft_read(k, v, beta_aft, impl=impl, cu_seqlens=cu),
                             lambda k, v: seqmix.fem_aft_read(k, v, beta_aft, impl=impl), (k_aft, v_aft))

    def test_ssm_scan(self):
        T, S = sum(LENGTHS), 3
        u, delta = torch.randn(1, T, C, dtype=D), torch.rand(1, T, C, dtype=D) + 0.1
        A, b, c = -torch.rand(C, S, dtype=D) - 0.1, torch.rand(1, T, S, dtype=D), torch.rand(1, T, S, dtype=D)
        for impl in seqmix.op_impls("ssm_scan"):
            with self.subTest(impl=impl):
                self.compare(lambda u, delta, b, c, cu: seqmix.ssm_scan(u, delta, A, b, c, impl, cu_seqlens=cu),
                             lambda u, delta, b, c: seqmix.ssm_scan(u, delta, A, b, c, impl), (u, delta, b, c))
        lengths = (3, 70, 1)
        T, cu = sum(lengths), offsets(lengths)
        u, delta = torch.randn(1, T, C, dtype=D), torch.rand(1, T, C, dtype=D) + 0.1
        b, c, h0 = torch.rand(1, T, S, dtype=D), torch.rand(1, T, S, dtype=D), torch.randn(len(lengths), C, S, dtype=D)
        for impl in seqmix.op_impls("ssm_scan"):
            with self.subTest(impl=impl, states=True):
                y, final = seqmix.ssm_scan(u, delta, A, b, c, impl, initial_state=h0, output_final_state=True,
                                           cu_seqlens=cu)
                for s in range(len(lengths)):
                    x, z = cu[s].item(), cu[s + 1].item()
                    y_s, final_s = seqmix.ssm_scan(u[:, x:z], delta[:, x:z], A, b[:, x:z], c[:, x:z], impl,
                                                   initial_state=h0[s:s + 1], output_final_state=True)
                    torch.testing.assert_close(y[:, x:z], y_s, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(final[s:s + 1], final_s, atol=1e-10, rtol=1e-10)

    def test_aft_states_per_sequence(self):
        lengths = (3, 70, 1)
        T, N, cu = sum(lengths), len(lengths), offsets(lengths)
        k, v = torch.randn(1, T, C, dtype=D) * 2, torch.randn(1, T, C, dtype=D)
        _, _, start = seqmix.aft(torch.randn(N, 4, C, dtype=D), torch.randn(N, 4, C, dtype=D), output_final_state=True)
        for impl in seqmix.op_impls("aft"):
            with self.subTest(impl=impl):
                num, den, final = seqmix.aft(k, v, None, impl, initial_state=start, output_final_state=True,
                                             cu_seqlens=cu)
                for s in range(N):
                    x, y = cu[s].item(), cu[s + 1].item()
                    n, d, alone = seqmix.aft(k[:, x:y], v[:, x:y], None, impl,
                                             initial_state=tuple(t[s:s + 1] for t in start), output_final_state=True)
                    torch.testing.assert_close(num[:, x:y], n, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(den[:, x:y], d, atol=1e-10, rtol=1e-10)
                    for got, want in zip(final, alone):
                        torch.testing.assert_close(got[s:s + 1], want, atol=1e-10, rtol=1e-10)

    def test_gla(self):
        T = sum(LENGTHS)
        q, k = torch.rand(1, T, H, DK, dtype=D) + 0.1, torch.rand(1, T, H, DK, dtype=D) + 0.1
        v = torch.randn(1, T, H, DV, dtype=D)
        for name, a in (("per head", -torch.rand(1, T, H, dtype=D) * 0.3),
                        ("per key", -torch.rand(1, T, H, DK, dtype=D) * 0.3)):
            for impl in seqmix.op_impls("gla"):
                with self.subTest(decay=name, impl=impl):
                    self.compare(lambda q, k, v, a, cu: seqmix.gla(q, k, v, a, impl, cu_seqlens=cu),
                                 lambda q, k, v, a: seqmix.gla(q, k, v, a, impl), (q, k, v, a))

    def test_states_per_sequence(self):
        """initial_state [N,H,dk,dv] / [N,H,dk] per sequence in, the final state of each sequence out."""
        lengths = (3, 70, 1)
        T, N = sum(lengths), len(lengths)
        q, k = torch.rand(1, T, H, DK, dtype=D) + 0.1, torch.rand(1, T, H, DK, dtype=D) + 0.1
        v, a = torch.randn(1, T, H, DV, dtype=D), -torch.rand(1, T, H, dtype=D) * 0.3
        kv0, z0 = torch.randn(N, H, DK, DV, dtype=D), torch.rand(N, H, DK, dtype=D)
        cu = offsets(lengths)
        ops = {"gla": lambda q, k, v, a, impl, **kw: seqmix.gla(q, k, v, a, impl, **kw),
               "linear_attention": lambda q, k, v, a, impl, **kw: seqmix.linear_attention(q, k, v, True, impl, **kw)}
        for (name, op), impl in ((o, i) for o in ops.items() for i in seqmix.op_impls(o[0])):
            with self.subTest(op=name, impl=impl):
                num, den, (kv, z) = op(q, k, v, a, impl, initial_state=(kv0, z0), output_final_state=True,
                                       cu_seqlens=cu)
                for s in range(N):
                    x, y = cu[s].item(), cu[s + 1].item()
                    n, d, (kv_s, z_s) = op(q[:, x:y], k[:, x:y], v[:, x:y], a[:, x:y], impl,
                                           initial_state=(kv0[s:s + 1], z0[s:s + 1]), output_final_state=True)
                    torch.testing.assert_close(num[:, x:y], n, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(den[:, x:y], d, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(kv[s:s + 1], kv_s, atol=1e-10, rtol=1e-10)
                    torch.testing.assert_close(z[s:s + 1], z_s, atol=1e-10, rtol=1e-10)


class PackedFusedMatchesNaive(unittest.TestCase):
    def test_float32_fused_against_float64_naive(self):
        """The naive twin in float64 as ground truth for the float32 fused kernel, packed, outputs and gradients."""
        T, cu = sum(LENGTHS), offsets(LENGTHS)
        q, k = torch.rand(1, T, H, DK, dtype=D) + 0.1, torch.rand(1, T, H, DK, dtype=D) + 0.1
        v, a = torch.randn(1, T, H, DV, dtype=D), -torch.rand(1, T, H, DK, dtype=D) * 0.3
        ssm_A = -torch.rand(H * DV, 2, dtype=D) - 0.1  # [C, N_state], decays
        calls = {"attention": (lambda x, impl: seqmix.attention(*x, impl=impl, cu_seqlens=cu), (q, k, v)),
                 "linear_attention": (lambda x, impl: seqmix.linear_attention(*x, impl=impl, cu_seqlens=cu), (q, k, v)),
                 "aft": (lambda x, impl: seqmix.aft(*x, impl=impl, cu_seqlens=cu), (k.flatten(2) * 3, v.flatten(2)[..., :H * DK])),
                 "ssm_scan": (lambda x, impl: seqmix.ssm_scan(*x, impl=impl, cu_seqlens=cu),
                              (v.flatten(2), v.flatten(2).abs() * 0.5 + 0.1, ssm_A, k[..., 0, :2], q[..., 0, :2])),
                 "gla per head": (lambda x, impl: seqmix.gla(*x, impl=impl, cu_seqlens=cu), (q, k, v, a[..., 0])),
                 "gla per key": (lambda x, impl: seqmix.gla(*x, impl=impl, cu_seqlens=cu), (q, k, v, a))}
        for name, (call, inputs) in calls.items():
            results = {}
            for impl, dtype in (("naive", D), ("fused", torch.float32)):
                leaves = [x.detach().to(dtype).requires_grad_() for x in inputs]
                outs = call(leaves, impl)
                outs = outs if isinstance(outs, tuple) else (outs,)
                torch.manual_seed(1)
                sum((o * torch.randn(o.shape, dtype=D).to(dtype)).sum() for o in outs).backward()
                results[impl] = [o.detach().double() for o in outs] + [x.grad.double() for x in leaves]
            with self.subTest(op=name):
                for got, want in zip(results["fused"], results["naive"]):
                    torch.testing.assert_close(got, want, atol=2e-4 * want.abs().max().item(), rtol=2e-4)


class BadOffsets(unittest.TestCase):
    def test_one_line_errors(self):
        q = torch.randn(1, 6, H, DK, dtype=D)
        v = torch.randn(1, 6, H, DV, dtype=D)
        a = -torch.rand(1, 6, H, dtype=D)
        cases = [(torch.tensor([0, 3, 5]), "must run from 0 to the packed length 6"),
                 (torch.tensor([0, 4, 3, 6]), "must not decrease"),
                 (torch.tensor([0, 3, 6], dtype=torch.int32), "cu_seqlens must be int64"),
                 (torch.tensor([[0, 6]]), "cu_seqlens must be int64 \\[N\\+1\\]")]
        for cu, message in cases:
            for impl in seqmix.op_impls("attention"):
                with self.subTest(op="attention", impl=impl, cu=cu.tolist()):
                    with self.assertRaisesRegex(RuntimeError, message):
                        seqmix.attention(q, q, v, impl=impl, cu_seqlens=cu)
            for impl in seqmix.op_impls("gla"):
                with self.subTest(op="gla", impl=impl, cu=cu.tolist()):
                    with self.assertRaisesRegex(RuntimeError, message):
                        seqmix.gla(q, q, v, a, impl, cu_seqlens=cu)
        with self.assertRaisesRegex(RuntimeError, "take a batch of 1"):
            seqmix.attention(q.expand(2, -1, -1, -1), q.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1),
                             cu_seqlens=torch.tensor([0, 6]))
        with self.assertRaisesRegex(RuntimeError, "give cu_seqlens or key_mask, not both"):
            seqmix.attention(q, q, v, key_mask=torch.ones(1, 6, dtype=torch.bool), cu_seqlens=torch.tensor([0, 6]))
        with self.assertRaisesRegex(RuntimeError, "initial states must be one per sequence"):
            seqmix.gla(q, q, v, a, initial_state=(torch.zeros(1, H, DK, DV, dtype=D), torch.zeros(1, H, DK, dtype=D)),
                       cu_seqlens=torch.tensor([0, 2, 6]))


if __name__ == "__main__":
    unittest.main()
