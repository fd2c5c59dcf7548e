"""Variable-length packed batches (cu_seqlens, flash-attn's and flash-linear-attention's convention): N sequences
concatenated in one row [1, total_T, ...]. For every op that takes cu_seqlens (attention, linear_attention, gla,
aft, ssm_scan and the FEM reads through the linear, GLA, AFT and SSM priors walk the boundaries in their kernels;
ELA, the delta rule, the second-order reads and FEM's softmax read run once per sequence), every impl, causal or
not: the
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

    def test_ops_that_run_once_per_sequence(self):
        """ELA, the delta rule, the second-order reads and FEM's softmax and SSM reads with cu_seqlens."""
        lengths = (1, 70, 5, 1, 40)
        T = sum(lengths)
        q, k, v = torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DV, dtype=D)
        unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
        beta_delta = torch.rand(1, T, H, dtype=D) * 0.8 + 0.1
        beta, temperature, bias_scale, tau = (torch.rand(H * DV, dtype=D) + 0.5, torch.rand(H, dtype=D) + 0.5,
                                              torch.randn(H, dtype=D), torch.rand(H, dtype=D))
        for kernel in ("hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude"):
            for impl in seqmix.op_impls("ela"):
                for causal in (True, False):
                    with self.subTest(op="ela", kernel=kernel, impl=impl, causal=causal):
                        self.compare(lambda q, k, v, cu: seqmix.ela(q, k, v, kernel, causal, impl=impl, cu_seqlens=cu),
                                     lambda q, k, v: seqmix.ela(q, k, v, kernel, causal, impl=impl), (q, k, v),
                                     lengths)
        for impl in seqmix.op_impls("delta_rule"):
            with self.subTest(op="delta_rule", impl=impl):
                self.compare(lambda q, k, v, b, cu: seqmix.delta_rule(unit(q), unit(k), v, b, impl, cu_seqlens=cu),
                             lambda q, k, v, b: seqmix.delta_rule(unit(q), unit(k), v, b, impl), (q, k, v, beta_delta),
                             lengths)
        for impl in seqmix.op_impls("mha2nd1st_read"):
            for causal in (True, False):
                with self.subTest(op="mha2nd1st_read", impl=impl, causal=causal):
                    self.compare(lambda q, k, cu: seqmix.mha2nd1st_read(q, k, temperature, bias_scale, causal, impl,
                                                                        cu_seqlens=cu),
                                 lambda q, k: seqmix.mha2nd1st_read(q, k, temperature, bias_scale, causal, impl),
                                 (q, k), lengths)
                with self.subTest(op="light2nd1st_read", impl=impl, causal=causal):
                    self.compare(lambda q, k, v, cu: seqmix.light2nd1st_read(q, k, v, 0.5, tau, causal, impl,
                                                                             cu_seqlens=cu),
                                 lambda q, k, v: seqmix.light2nd1st_read(q, k, v, 0.5, tau, causal, impl), (q, k, v),
                                 lengths)
        for impl in seqmix.op_impls("fem_softmax_read"):
            for causal in (True, False):
                with self.subTest(op="fem_softmax_read", impl=impl, causal=causal):
                    self.compare(lambda q, k, v, cu: seqmix.fem_softmax_read(q, k, v, beta, causal=causal, impl=impl,
                                                                             cu_seqlens=cu),
                                 lambda q, k, v: seqmix.fem_softmax_read(q, k, v, beta, causal=causal, impl=impl),
                                 (q, k, v), lengths)
        L, R = T, 2  # HyperMLP's mixing: parameters for up to L lags, rank R, gates per position
        mixing = lambda hm: (torch.randn(hm, L, dtype=D) * 0.1, torch.randn(hm, L, R, dtype=D) * 0.3,  # noqa: E731
                             torch.randn(hm, R, L, dtype=D) * 0.3)
        mixing1, mixing2 = mixing(2 * H), mixing(H)
        qg, kg = torch.randn(1, T, 2 * H, DK, dtype=D), torch.randn(1, T, 2 * H, DK, dtype=D)
        s1, s2 = torch.randn(1, T, 2 * H, R, dtype=D), torch.randn(1, T, H, R, dtype=D)
        for impl in seqmix.op_impls("hypermlp_read"):
            for layout in ("lag", "forward"):
                with self.subTest(op="hypermlp_read", impl=impl, layout=layout):
                    self.compare(lambda q, k, v, s1, s2, cu: seqmix.hypermlp_read(
                                     q, k, v, s1, mixing1, s2, mixing2, "glu", layout, block=16, impl=impl,
                                     cu_seqlens=cu),
                                 lambda q, k, v, s1, s2: seqmix.hypermlp_read(
                                     q, k, v, s1, mixing1, s2, mixing2, "glu", layout, block=16, impl=impl),
                                 (qg, kg, v, s1, s2), lengths)
        S = 3
        u, delta = torch.randn(1, T, C, dtype=D), torch.rand(1, T, C, dtype=D) + 0.1
        A, b, c = -torch.rand(C, S, dtype=D) - 0.1, torch.rand(1, T, S, dtype=D), torch.rand(1, T, S, dtype=D)
        beta_c, skip = torch.rand(C, dtype=D) + 0.5, torch.randn(C, dtype=D)
        for impl in seqmix.op_impls("fem_ssm_read"):
            with self.subTest(op="fem_ssm_read", impl=impl):
                self.compare(lambda u, delta, b, c, cu: seqmix.fem_ssm_read(u, delta, A, b, c, beta_c, skip, impl=impl,
                                                                            cu_seqlens=cu),
                             lambda u, delta, b, c: seqmix.fem_ssm_read(u, delta, A, b, c, beta_c, skip, impl=impl),
                             (u, delta, b, c), lengths)

    def test_ela_and_delta_states_per_sequence(self):
        lengths = (3, 20, 1)
        N, T, cu = len(lengths), sum(lengths), offsets(lengths)
        q, k, v = torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DK, dtype=D), torch.randn(1, T, H, DV, dtype=D)
        for kernel in ("hadamard_exp", "sum_sq_euclidean"):
            # A state from an earlier call of each sequence: the final state of a random prefix.
            prefix = torch.randn(N, 4, H, DK, dtype=D), torch.randn(N, 4, H, DK, dtype=D), torch.randn(N, 4, H, DV, dtype=D)
            _, state = seqmix.ela(prefix[0], prefix[1], prefix[2], kernel, output_final_state=True)
            for impl in seqmix.op_impls("ela"):
                with self.subTest(op="ela", kernel=kernel, impl=impl):
                    y, final = seqmix.ela(q, k, v, kernel, impl=impl, initial_state=state, output_final_state=True,
                                          cu_seqlens=cu)
                    for s in range(N):
                        a, b = cu[s].item(), cu[s + 1].item()
                        row = tuple(t[s:s + 1] if t.numel() else t for t in state)
                        y_s, final_s = seqmix.ela(q[:, a:b], k[:, a:b], v[:, a:b], kernel, impl=impl, initial_state=row,
                                                  output_final_state=True)
                        torch.testing.assert_close(y[:, a:b], y_s, atol=1e-10, rtol=1e-10)
                        for got, want in zip(final, final_s):
                            torch.testing.assert_close(got[s:s + 1] if got.numel() else got, want, atol=1e-10,
                                                       rtol=1e-10)
        beta = torch.rand(1, T, H, dtype=D)
        kv0, z0 = torch.randn(N, H, DK, DV, dtype=D), torch.rand(N, H, DK, dtype=D)
        num, den, (kv, z) = seqmix.delta_rule(q, k, v, beta, initial_state=(kv0, z0), output_final_state=True,
                                              cu_seqlens=cu)
        for s in range(N):
            a, b = cu[s].item(), cu[s + 1].item()
            num_s, den_s, (kv_s, z_s) = seqmix.delta_rule(q[:, a:b], k[:, a:b], v[:, a:b], beta[:, a:b],
                                                          initial_state=(kv0[s:s + 1], z0[s:s + 1]),
                                                          output_final_state=True)
            torch.testing.assert_close(num[:, a:b], num_s, atol=1e-10, rtol=1e-10)
            torch.testing.assert_close(den[:, a:b], den_s, atol=1e-10, rtol=1e-10)
            torch.testing.assert_close(kv[s:s + 1], kv_s, atol=1e-10, rtol=1e-10)
            torch.testing.assert_close(z[s:s + 1], z_s, atol=1e-10, rtol=1e-10)

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


class PackedLayers(unittest.TestCase):
    """Mixers and the lm model take packed sequences too: Mixer(x [1,N,dim], cu_seqlens=...) and Model(tokens [1,N],
    cu_seqlens=...) equal each sequence alone, in one kernel call where the mixer packs natively."""

    def test_mixers(self):
        lengths = (4, 1, 9, 6)
        cu = offsets(lengths)
        for spec, native in (("softmax:heads=2", True), ("gla:heads=2", True), ("linear:causal=0", True),
                             ("fem:prior=gla,heads=2", False), ("ela:heads=2", False)):
            with self.subTest(mixer=spec):
                mixer = seqmix.Mixer(spec, 16, 32).double()
                self.assertEqual(mixer.packs_natively, native)
                x = torch.randn(1, sum(lengths), 16, dtype=D, requires_grad=True)
                packed = mixer(x, cu_seqlens=cu)
                alone = torch.cat([mixer(x[:, a:b]) for a, b in zip(cu[:-1].tolist(), cu[1:].tolist())], 1)
                torch.testing.assert_close(packed, alone, atol=1e-10, rtol=1e-10)
                w = torch.randn_like(packed)
                grad_packed, = torch.autograd.grad((packed * w).sum(), x)
                grad_alone, = torch.autograd.grad((alone * w).sum(), x)
                torch.testing.assert_close(grad_packed, grad_alone, atol=1e-10, rtol=1e-10)
        with self.assertRaisesRegex(RuntimeError, "cu_seqlens must run from 0 to the packed length 20"):
            seqmix.Mixer("softmax", 16)(torch.randn(1, 20, 16), cu_seqlens=torch.tensor([0, 5]))

    def test_language_model(self):
        lengths = (5, 1, 11)
        cu = offsets(lengths)
        model = seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2", "gla:heads=2"], dim=16, layers=2,
                                     max_len=16, pos="learned").double()
        tokens = torch.randint(0, 20, (1, sum(lengths)))
        packed = model(tokens, cu_seqlens=cu)
        for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
            torch.testing.assert_close(packed[:, a:b], model(tokens[:, a:b]), atol=1e-10, rtol=1e-10)
        starts = torch.zeros(1, sum(lengths), dtype=torch.bool)
        starts[0, cu[:-1]] = True
        torch.testing.assert_close(model(tokens, sequence_starts=starts), packed, atol=0, rtol=0)
        with self.assertRaisesRegex(ValueError, "must rise from 0 to the packed length 17"):
            model(tokens, cu_seqlens=torch.tensor([0, 4]))


class BadOffsets(unittest.TestCase):
    def test_ops_run_once_per_sequence_refuse_torch_compile(self):
        q, v = torch.randn(1, 6, H, DK), torch.randn(1, 6, H, DV)
        compiled = torch.compile(lambda q, v, cu: seqmix.ela(q, q, v, cu_seqlens=cu), fullgraph=True,
                                 backend="aot_eager")
        with self.assertRaisesRegex(Exception, "ela: with cu_seqlens this op runs once per sequence"):
            compiled(q, v, torch.tensor([0, 2, 6]))

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
