"""Every op of torch.ops.seqmix from Python against a pure-PyTorch reference written here, forward and
gradients (torch.autograd.gradcheck in float64), in every implementation the op table gives it (fused, naive,
torch), on small awkward shapes."""
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import seqmix

torch.manual_seed(0)
D = torch.float64


def op_impls(op):
    """The implementations of torch.ops.seqmix.<op>, from the op table."""
    return seqmix.op_impls(op)


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=D) * scale).requires_grad_()


def visible(T, S, causal):
    """[T,S] bool: query t (the last T of S positions) sees key j."""
    if not causal:
        return torch.ones(T, S, dtype=torch.bool)
    return torch.arange(S)[None, :] <= torch.arange(T)[:, None] + (S - T)


def scores(q, k):
    return torch.einsum("bthd,bshd->bhts", q, k)


# ---- references ----------------------------------------------------------------------------------------

def attention_ref(q, k, v, causal, scale, key_mask=None):
    s = scores(q, k) * scale
    allowed = visible(q.shape[1], k.shape[1], causal)[None, None]
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    p = torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1)
    return torch.einsum("bhts,bshd->bthd", p, v)


def relu_attention_ref(q, k, v, causal, eps):
    s = scores(q, k).masked_fill(~visible(q.shape[1], k.shape[1], causal), 0.0)
    r = torch.relu(s / torch.sqrt((s * s).sum(-1, keepdim=True) + eps))
    return torch.einsum("bhts,bshd->bthd", r, v)


def fem_softmax_ref(q, k, v, beta, cap, causal, scale):
    H, dv = v.shape[2], v.shape[3]
    b = beta.reshape(H, dv)
    vc = torch.maximum(torch.minimum(v, cap / b), -cap / b)
    logits = (scores(q, k) * scale).masked_fill(~visible(q.shape[1], k.shape[1], causal), -math.inf)
    logp = torch.log_softmax(logits, dim=-1)  # [B,H,T,S]
    mean = torch.einsum("bhts,bshd->bthd", logp.exp(), vc)
    u = (b * vc).permute(0, 2, 1, 3)  # [B,H,S,dv]
    free = torch.logsumexp(logp[..., None] + u[:, :, None], dim=3) / b[None, :, None, :]  # [B,H,T,dv]
    return mean, free.permute(0, 2, 1, 3)


def linear_attention_ref(q, k, v, causal):
    w = scores(q, k).masked_fill(~visible(q.shape[1], k.shape[1], causal), 0.0)
    return torch.einsum("bhts,bshd->bthd", w, v), w.sum(-1).permute(0, 2, 1)


def gla_ref(q, k, v, log_decay):
    c = log_decay.cumsum(1).permute(0, 2, 1)  # [B,H,T]
    T = q.shape[1]
    decay = (c[..., :, None] - c[..., None, :]).masked_fill(~visible(T, T, True), -math.inf).exp()
    w = scores(q, k) * decay
    return torch.einsum("bhts,bshd->bthd", w, v), w.sum(-1).permute(0, 2, 1)


def gla_per_key_ref(q, k, v, log_decay):
    """The per-key recurrence itself, one token at a time: S <- diag(exp(a_t)) S + k_t v_t^T, z likewise."""
    B, T, H, dk = q.shape
    S, z = q.new_zeros(B, H, dk, v.shape[-1]), q.new_zeros(B, H, dk)
    nums, dens = [], []
    for t in range(T):
        decay = log_decay[:, t].exp()  # [B,H,dk]
        S = decay[..., None] * S + k[:, t, ..., None] * v[:, t, :, None, :]
        z = decay * z + k[:, t]
        nums.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
        dens.append((q[:, t] * z).sum(-1))
    return torch.stack(nums, 1), torch.stack(dens, 1)


def delta_rule_ref(q, k, v, beta):
    """The recurrence itself, one token at a time: S <- (I - b k k^T) S + b k v^T, z the same on a value of ones."""
    B, T, H, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1])
    z = q.new_zeros(B, H, dk)
    nums, dens = [], []
    for t in range(T):
        k_t, b_t = k[:, t], beta[:, t, :, None]
        S = S + (b_t * k_t)[..., None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", k_t, S))[..., None, :]
        z = z + b_t * k_t * (1 - (k_t * z).sum(-1, keepdim=True))
        nums.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
        dens.append((q[:, t] * z).sum(-1))
    return torch.stack(nums, 1), torch.stack(dens, 1)


def aft_ref(k, v, mask=None):
    """Returns numerator, normaliser relative to the causal running max of the real keys."""
    T = k.shape[1]
    real = torch.ones_like(k, dtype=torch.bool) if mask is None else mask[..., None].expand_as(k)
    keys = k.masked_fill(~real, -1e30)
    running_max = torch.cummax(keys, dim=1).values  # [B,T,C]
    allowed = visible(T, T, True)[None, :, :, None] & real[:, None, :, :]  # [B,t,i,C]
    w = torch.exp(keys[:, None, :, :] - running_max[:, :, None, :]).masked_fill(~allowed, 0.0)
    return (w * v[:, None]).sum(2), w.sum(2)


def ssm_ref(u, delta, A, b, c):
    B, T, C = u.shape
    h = torch.zeros(B, C, A.shape[1], dtype=u.dtype)
    ys = []
    for t in range(T):
        h = torch.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * b[:, t, None, :] * u[:, t, :, None]
        ys.append((h * c[:, t, None, :]).sum(-1))
    return torch.stack(ys, 1)


def ela_ref(q, k, v, kernel, causal):
    if kernel == "hadamard_exp":
        K = torch.einsum("bthd,bshd->bhts", q.exp(), k.exp())
    elif kernel == "sum_sq_euclidean":
        K = ((q[:, :, None] + k[:, None]) ** 2).sum(-1).permute(0, 3, 1, 2)  # [B,t,s,H] -> [B,H,t,s]
    elif kernel == "sub_sq_euclidean":
        K = ((q[:, :, None] - k[:, None]) ** 2).sum(-1).permute(0, 3, 1, 2)
    elif kernel == "direction_magnitude":  # 1 + ||q|| ||k|| (1 + cos(q, k)) = 1 + ||q|| ||k|| + q.k
        norms = q.norm(dim=-1).permute(0, 2, 1)[..., :, None] * k.norm(dim=-1).permute(0, 2, 1)[..., None, :]
        K = 1 + norms + scores(q, k)
    else:
        raise ValueError(kernel)
    K = K.masked_fill(~visible(q.shape[1], k.shape[1], causal), 0.0)
    return torch.einsum("bhts,bshd->bthd", K / K.sum(-1, keepdim=True), v)


def hypermlp_ref(q, k, v, s1, mix1, s2, mix2, activation, layout, eps, scale):
    """The formula of src/ops/hypermlp/README.md, one query row and one (batch, head) at a time."""
    B, T, Hq, _ = q.shape
    S, H = k.shape[1], v.shape[2]

    def mixer(mix, s_row, rows):  # Diag(1 + p[P]) + U[P] Diag(s) Vt[:, P], one head
        diag, U, Vt = mix
        return torch.diag(diag[rows] + 1) + (U[rows] * s_row) @ Vt[:, rows]

    out = torch.zeros(B, T, H, v.shape[3], dtype=q.dtype)
    for b in range(B):
        for t in range(T):
            position = S - T + t
            lag = torch.arange(position + 1)
            keys = position - lag
            h_heads = []
            for j in range(Hq):
                z = (k[b, keys, j] @ q[b, t, j]) * scale
                if mix1 is not None:
                    rows = (mix1[1].shape[1] - 1 - lag) if layout == "lag" else keys
                    z = z @ mixer([m[j] for m in mix1], s1[b, t, j], rows)
                h_heads.append(z)
            for j in range(H):
                if activation == "relu":
                    h = h_heads[j]
                    a, inv = torch.relu(h), 1 / torch.sqrt((h * h).sum() + eps)
                elif activation == "glu":
                    gate, size = h_heads[j], h_heads[H + j]
                    a, inv = torch.nn.functional.softplus(size) * torch.relu(gate), 1 / torch.sqrt((gate * gate).sum() + eps)
                else:
                    a, inv = torch.softmax(h_heads[j], 0), 1.0
                if mix2 is not None:
                    rows = (mix2[1].shape[1] - 1 - lag) if layout == "lag" else keys
                    a = a @ mixer([m[j] for m in mix2], s2[b, t, j], rows)
                out[b, t, j] = inv * (a @ v[b, keys, j])
    return out


def mha2nd1st_ref(q, k, temperature, bias_scale, causal):
    T_h = temperature[None, :, None, None]
    logits = (scores(q, k) - 0.5 * (k * k).sum(-1).permute(0, 2, 1)[:, :, None, :]) / T_h
    p = torch.softmax(logits.masked_fill(~visible(q.shape[1], k.shape[1], causal), -math.inf), -1)  # [B,H,T,S]
    kbar = torch.einsum("bhts,bshd->bthd", p, k)
    u = q - kbar
    centred = k[:, None] - kbar[:, :, None]  # [B,T,S,H,d]
    cov_u = torch.einsum("bhts,btshd,btshe,bthe->bthd", p, centred, centred, u)
    return u + bias_scale[None, None, :, None] * cov_u


def light2nd1st_ref(q, k, v, scale, tau, causal):
    p = torch.softmax((scores(q, k) * scale).masked_fill(~visible(q.shape[1], k.shape[1], causal), -math.inf), -1)
    vbar = torch.einsum("bhts,bshd->bthd", p, v)
    centred = v[:, None] - vbar[:, :, None]
    cov_vbar = torch.einsum("bhts,btshd,btshe,bthe->bthd", p, centred, centred, vbar)
    return vbar + tau[None, None, :, None] * cov_vbar


# ---- tests -------------------------------------------------------------------------------------------------

class OpCase(unittest.TestCase):
    def check(self, op, reference, inputs, atol=1e-9, rtol=1e-7, gradcheck=True):
        """op(*inputs) against reference(*inputs), then gradcheck of op (every output summed in)."""
        expected = reference(*inputs)
        got = op(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = got if isinstance(got, (tuple, list)) else (got,)
        self.assertEqual(len(got), len(expected))
        for g, e in zip(got, expected):
            self.assertEqual(g.shape, e.shape)
            torch.testing.assert_close(g, e, atol=atol, rtol=rtol)
        if gradcheck:
            self.assertTrue(torch.autograd.gradcheck(op, inputs, eps=1e-6, atol=1e-5, rtol=1e-4))


class Attention(OpCase):
    def test_fused_and_naive_match_the_definition(self):
        q, k, v = randn(2, 5, 2, 3), randn(2, 7, 2, 3), randn(2, 7, 2, 4)
        for impl in op_impls("attention"):  # torch: PyTorch's own scaled_dot_product_attention
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    self.check(lambda q, k, v: seqmix.attention(q, k, v, causal, 0.7, impl=impl),
                               lambda q, k, v: attention_ref(q, k, v, causal, 0.7), (q, k, v))

    def test_key_mask_and_default_scale(self):
        q, k, v = randn(2, 6, 1, 4), randn(2, 6, 1, 4), randn(2, 6, 1, 2)
        mask = torch.tensor([[True] * 6, [True, True, False, True, False, True]])
        for impl in ("fused", "torch"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v: seqmix.attention(q, k, v, key_mask=mask, impl=impl),
                           lambda q, k, v: attention_ref(q, k, v, True, 0.5, mask), (q, k, v))

    def test_float32_matches_float64(self):
        q, k, v = (torch.randn(1, 33, 2, 8, dtype=D) for _ in range(3))
        got = seqmix.attention(q.float(), k.float(), v.float())
        torch.testing.assert_close(got.double(), attention_ref(q, k, v, True, 8 ** -0.5), atol=2e-6, rtol=1e-5)

    def test_below_autograd_runs_the_same_function(self):
        q, k, v = (torch.randn(1, 9, 2, 4) for _ in range(3))
        with torch.inference_mode():
            below = seqmix.attention(q, k, v)
        torch.testing.assert_close(below, seqmix.attention(q, k, v), atol=0, rtol=0)

    def test_bad_arguments_are_runtime_errors(self):
        with self.assertRaisesRegex(RuntimeError, "impl"):
            seqmix.attention(*(torch.randn(1, 2, 1, 2) for _ in range(3)), impl="turbo")
        with self.assertRaisesRegex(RuntimeError, "gla has no impl 'torch'"):
            seqmix.gla(*(torch.rand(1, 2, 1, 2) for _ in range(3)), torch.zeros(1, 2, 1), impl="torch")
        with self.assertRaises(RuntimeError):
            seqmix.attention(torch.randn(1, 2, 1, 2), torch.randn(1, 2, 1, 3), torch.randn(1, 2, 1, 2))


class ReluAttention(OpCase):
    def test_matches_the_definition(self):
        q, k, v = randn(2, 5, 2, 3), randn(2, 5, 2, 3), randn(2, 5, 2, 2)
        self.check(lambda q, k, v: seqmix.relu_attention(q, k, v, True, 1e-6),
                   lambda q, k, v: relu_attention_ref(q, k, v, True, 1e-6), (q, k, v))


class FemSoftmaxRead(OpCase):
    def test_mean_and_free_energy(self):
        q, k, v = randn(1, 5, 2, 3), randn(1, 6, 2, 3), randn(1, 6, 2, 2)
        beta = (torch.rand(4, dtype=D) + 0.5).requires_grad_()
        for impl in op_impls("fem_softmax_read"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, b: seqmix.fem_softmax_read(q, k, v, b, 10.0, True, 0.6, impl=impl),
                           lambda q, k, v, b: fem_softmax_ref(q, k, v, b, 10.0, True, 0.6), (q, k, v, beta))

    def test_the_cap_clips(self):
        q, k = randn(1, 4, 1, 2), randn(1, 4, 1, 2)
        v = (torch.randn(1, 4, 1, 3, dtype=D) * 20).requires_grad_()
        beta = torch.full((3,), 1.0, dtype=D, requires_grad=True)
        self.check(lambda q, k, v, b: seqmix.fem_softmax_read(q, k, v, b, 5.0, impl="naive"),
                   lambda q, k, v, b: fem_softmax_ref(q, k, v, b, 5.0, True, 2 ** -0.5), (q, k, v, beta),
                   gradcheck=False)

    def test_scale_values_and_restore(self):
        v, beta = randn(2, 3, 4), (torch.rand(4, dtype=D) + 0.5).requires_grad_()
        clipped, scaled = seqmix.fem_scale_values(v, beta, 1.0)
        torch.testing.assert_close(clipped, torch.maximum(torch.minimum(v, 1 / beta), -1 / beta))
        torch.testing.assert_close(scaled, beta * clipped)
        z = torch.rand(2, 3, 4, dtype=D) + 0.1
        torch.testing.assert_close(seqmix.fem_restore(z, torch.tensor(2.0, dtype=D), beta), (z.log() + 2) / beta)


def fem_linear_prior_ref(read, v, beta, cap):
    """The FEM read through a linear prior by its definition: mean E_p[clip v], F = log E_p[exp(beta clip v)] / beta."""
    b = beta.reshape(v.shape[2:])
    vc = torch.maximum(torch.minimum(v, cap / b), -cap / b)
    return read(vc), torch.log(read(torch.exp(b * vc))) / b


class FemLinearPriors(OpCase):
    def test_linear_prior(self):
        q, k = (torch.rand(2, 5, 2, 3, dtype=D) + 0.1).requires_grad_(), (torch.rand(2, 5, 2, 3, dtype=D) + 0.1).requires_grad_()
        v, beta = randn(2, 5, 2, 2), (torch.rand(4, dtype=D) + 0.5).requires_grad_()

        def reference(q, k, v, beta):
            def read(values):
                num, den = linear_attention_ref(q, k, values, True)
                return num / den[..., None]
            return fem_linear_prior_ref(read, v, beta, 40.0)

        for impl in op_impls("fem_linear_read"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, b: seqmix.fem_linear_read(q, k, v, b, 40.0, True, impl), reference, (q, k, v, beta))

    def test_linear_prior_bidirectional_and_clipped(self):
        q, k = torch.rand(1, 5, 2, 3, dtype=D) + 0.1, torch.rand(1, 5, 2, 3, dtype=D) + 0.1
        v, beta = torch.randn(1, 5, 2, 2, dtype=D) * 20, torch.rand(4, dtype=D) + 0.5  # |beta v| beyond the cap

        def reference(q, k, v, beta, causal):
            def read(values):
                num, den = linear_attention_ref(q, k, values, causal)
                return num / den[..., None]
            return fem_linear_prior_ref(read, v, beta, 5.0)

        for causal in (True, False):
            with self.subTest(causal=causal):
                self.check(lambda q, k, v, b: seqmix.fem_linear_read(q, k, v, b, 5.0, causal),
                           lambda q, k, v, b: reference(q, k, v, b, causal), (q, k, v, beta), gradcheck=False)

    def test_float32_composites_match_the_float64_definition(self):
        """The composites read in float64 inside; float32 inputs give float32 outputs at float32 accuracy."""
        q, k = torch.rand(2, 9, 2, 4, dtype=D) + 0.1, torch.rand(2, 9, 2, 4, dtype=D) + 0.1
        v, beta, a = torch.randn(2, 9, 2, 3, dtype=D) * 4, torch.rand(6, dtype=D) + 0.5, -torch.rand(2, 9, 2, dtype=D)

        def read(values):
            num, den = gla_ref(q, k, values, a)
            return num / den[..., None]

        expected = fem_linear_prior_ref(read, v, beta, 40.0)
        got = seqmix.fem_gla_read(q.float(), k.float(), v.float(), a.float(), beta.float(), 40.0)
        for g, e in zip(got, expected):
            self.assertEqual(g.dtype, torch.float32)
            torch.testing.assert_close(g.double(), e, atol=1e-5, rtol=1e-5)

    def test_gla_prior(self):
        q, k = (torch.rand(1, 6, 2, 3, dtype=D) + 0.1).requires_grad_(), (torch.rand(1, 6, 2, 3, dtype=D) + 0.1).requires_grad_()
        v, beta = randn(1, 6, 2, 2), (torch.rand(4, dtype=D) + 0.5).requires_grad_()
        a = (-torch.rand(1, 6, 2, dtype=D) * 0.5).requires_grad_()

        def reference(q, k, v, a, beta):
            def read(values):
                num, den = gla_ref(q, k, values, a)
                return num / den[..., None]
            return fem_linear_prior_ref(read, v, beta, 40.0)

        for impl in op_impls("fem_gla_read"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, a, b: seqmix.fem_gla_read(q, k, v, a, b, 40.0, impl), reference, (q, k, v, a, beta))

    def test_aft_prior(self):
        k, v, beta = randn(2, 5, 3), randn(2, 5, 3), (torch.rand(3, dtype=D) + 0.5).requires_grad_()

        def reference(k, v, beta):
            def read(values):
                num, den = aft_ref(k, values)
                return num / den
            return fem_linear_prior_ref(read, v, beta, 40.0)

        for impl in op_impls("fem_aft_read"):
            with self.subTest(impl=impl):
                self.check(lambda k, v, b: seqmix.fem_aft_read(k, v, b, 40.0, None, impl), reference, (k, v, beta))


class FemAftMask(OpCase):
    def test_aft_prior_with_padding(self):
        k, v, beta = randn(2, 6, 3), randn(2, 6, 3), (torch.rand(3, dtype=D) + 0.5).requires_grad_()
        mask = torch.tensor([[True] * 6, [True, False, True, True, False, True]])

        def reference(k, v, beta):
            def read(values):
                num, den = aft_ref(k, values, mask)
                return num / den
            return fem_linear_prior_ref(read, v, beta, 40.0)

        for impl in op_impls("fem_aft_read"):
            with self.subTest(impl=impl):
                self.check(lambda k, v, b: seqmix.fem_aft_read(k, v, b, 40.0, mask, impl), reference, (k, v, beta))


class FemSsmPrior(OpCase):
    def test_ssm_prior_with_and_without_skip(self):
        v, beta = randn(2, 5, 3), (torch.rand(3, dtype=D) + 0.5).requires_grad_()
        delta = (torch.rand(2, 5, 3, dtype=D) + 0.1).requires_grad_()
        A = (-torch.rand(3, 2, dtype=D) - 0.1).requires_grad_()
        b, c = (torch.rand(2, 5, 2, dtype=D) + 0.1).requires_grad_(), (torch.rand(2, 5, 2, dtype=D) + 0.1).requires_grad_()
        skip = (torch.rand(3, dtype=D)).requires_grad_()

        def reference(v, delta, A, b, c, beta, skip=None):
            def read(values):
                extra = 0 if skip is None else values * skip
                extra_ones = 0 if skip is None else skip
                return (ssm_ref(values, delta, A, b, c) + extra) / (ssm_ref(torch.ones_like(values), delta, A, b, c) + extra_ones)
            return fem_linear_prior_ref(read, v, beta, 40.0)

        for impl in op_impls("fem_ssm_read"):
            with self.subTest(impl=impl, skip=False):
                self.check(lambda v, d, A, b, c, beta: seqmix.fem_ssm_read(v, d, A, b, c, beta, None, 40.0, impl),
                           reference, (v, delta, A, b, c, beta))
            with self.subTest(impl=impl, skip=True):
                self.check(lambda v, d, A, b, c, beta, s: seqmix.fem_ssm_read(v, d, A, b, c, beta, s, 40.0, impl),
                           reference, (v, delta, A, b, c, beta, skip))


class DecodeSteps(unittest.TestCase):
    """Stepping through the positions with the decode ops gives the full forward of the fused op."""

    def test_linear_attention_and_gla(self):
        B, T, H, dk, dv = 2, 6, 2, 3, 4
        q, k, v = (torch.randn(B, T, H, d, dtype=D) for d in (dk, dk, dv))
        a = -torch.rand(B, T, H, dtype=D)
        beta = torch.sigmoid(torch.randn(B, T, H, dtype=D))
        for name in ("linear_attention", "gla", "delta_rule"):
            state = seqmix.linear_attention_initial_state(B, H, dk, dv, torch.float64)
            self.assertEqual(state[0].shape, (B, H, dk, dv))
            nums, dens = [], []
            for t in range(T):
                if name == "gla":
                    n, d, state = seqmix.gla_step(q[:, t], k[:, t], v[:, t], a[:, t], state)
                elif name == "delta_rule":
                    n, d, state = seqmix.delta_rule_step(q[:, t], k[:, t], v[:, t], beta[:, t], state)
                else:
                    n, d, state = seqmix.linear_attention_step(q[:, t], k[:, t], v[:, t], state)
                nums.append(n)
                dens.append(d)
            full = (seqmix.gla(q, k, v, a) if name == "gla" else
                    seqmix.delta_rule(q, k, v, beta) if name == "delta_rule" else seqmix.linear_attention(q, k, v))
            with self.subTest(name=name):
                torch.testing.assert_close(torch.cat(nums, 1), full[0], atol=1e-12, rtol=1e-10)
                torch.testing.assert_close(torch.cat(dens, 1), full[1], atol=1e-12, rtol=1e-10)

    def test_aft(self):
        k, v = torch.randn(2, 7, 3, dtype=D) * 3, torch.randn(2, 7, 3, dtype=D)
        state = seqmix.aft_initial_state(2, 3, torch.float64)
        reads = []
        for t in range(7):
            n, d, state = seqmix.aft_step(k[:, t], v[:, t], state)
            reads.append(n / d)
        num, den = seqmix.aft(k, v)
        torch.testing.assert_close(torch.cat(reads, 1), num / den, atol=1e-12, rtol=1e-10)

    def test_ssm(self):
        u, delta = torch.randn(2, 5, 3, dtype=D), torch.rand(2, 5, 3, dtype=D) + 0.1
        A, b, c = -torch.rand(3, 2, dtype=D) - 0.1, torch.rand(2, 5, 2, dtype=D), torch.rand(2, 5, 2, dtype=D)
        state = seqmix.ssm_initial_state(2, 3, 2, torch.float64)
        ys = []
        for t in range(5):
            y, state = seqmix.ssm_step(u[:, t], delta[:, t], A, b[:, t], c[:, t], state)
            ys.append(y)
        torch.testing.assert_close(torch.stack(ys, 1), seqmix.ssm_scan(u, delta, A, b, c), atol=1e-12, rtol=1e-10)

    def test_ela(self):
        B, T, H, dk, dv = 1, 6, 2, 3, 2
        q, k, v = (torch.randn(B, T, H, d, dtype=D) for d in (dk, dk, dv))
        for kernel in ("hadamard_exp", "sum_sq_euclidean"):
            state = seqmix.ela_initial_state(B, H, dk, dv, kernel, torch.float64)
            ys = []
            for t in range(T):
                y, state = seqmix.ela_step(q[:, t], k[:, t], v[:, t], state, kernel)
                ys.append(y)
            with self.subTest(kernel=kernel):
                torch.testing.assert_close(torch.stack(ys, 1), seqmix.ela(q, k, v, kernel), atol=1e-12, rtol=1e-10)


class LinearScans(OpCase):
    def test_linear_attention(self):
        q, k, v = randn(2, 6, 2, 3), randn(2, 6, 2, 3), randn(2, 6, 2, 4)
        for impl in op_impls("linear_attention"):
            for causal in (True, False):
                with self.subTest(impl=impl, causal=causal):
                    self.check(lambda q, k, v: seqmix.linear_attention(q, k, v, causal, impl),
                               lambda q, k, v: linear_attention_ref(q, k, v, causal), (q, k, v))

    def test_gla(self):
        q, k, v = randn(1, 7, 2, 3), randn(1, 7, 2, 3), randn(1, 7, 2, 2)
        a = (-torch.rand(1, 7, 2, dtype=D)).requires_grad_()
        for impl in op_impls("gla"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, a: seqmix.gla(q, k, v, a, impl), gla_ref, (q, k, v, a))

    def test_gla_per_key(self):
        q, k, v = randn(2, 7, 2, 3), randn(2, 7, 2, 3), randn(2, 7, 2, 2)
        a = (-torch.rand(2, 7, 2, 3, dtype=D)).requires_grad_()  # a gate per key feature [B,T,H,dk]
        for impl in op_impls("gla"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, a: seqmix.gla(q, k, v, a, impl), gla_per_key_ref, (q, k, v, a))

    def test_delta_rule(self):
        unit = lambda x: (x / x.norm(dim=-1, keepdim=True)).detach().requires_grad_()
        q, k, v = unit(randn(2, 7, 2, 3)), unit(randn(2, 7, 2, 3)), randn(2, 7, 2, 2)
        beta = torch.sigmoid(torch.randn(2, 7, 2, dtype=D)).requires_grad_()
        for impl in op_impls("delta_rule"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, b: seqmix.delta_rule(q, k, v, b, impl), delta_rule_ref, (q, k, v, beta))

    def test_aft(self):
        k, v = randn(2, 6, 3, scale=2.0), randn(2, 6, 3)
        for impl in op_impls("aft"):
            with self.subTest(impl=impl):
                self.check(lambda k, v: seqmix.aft(k, v, None, impl), aft_ref, (k, v))

    def test_aft_mask(self):
        k, v = randn(2, 6, 3), randn(2, 6, 3)
        mask = torch.tensor([[True] * 6, [True, False, True, True, False, True]])
        for impl in op_impls("aft"):
            with self.subTest(impl=impl):
                self.check(lambda k, v: seqmix.normalised_read(*seqmix.aft(k, v, mask, impl), 1e-30),
                           lambda k, v: (lambda n, d: n / d)(*aft_ref(k, v, mask)), (k, v))

    def test_ssm_scan(self):
        u, b, c = randn(2, 5, 3), (torch.rand(2, 5, 2, dtype=D)).requires_grad_(), (torch.rand(2, 5, 2, dtype=D)).requires_grad_()
        delta = (torch.rand(2, 5, 3, dtype=D) + 0.1).requires_grad_()
        A = (-torch.rand(3, 2, dtype=D) - 0.1).requires_grad_()
        for impl in op_impls("ssm_scan"):
            with self.subTest(impl=impl):
                self.check(lambda *x: seqmix.ssm_scan(*x, impl=impl), ssm_ref, (u, delta, A, b, c))

    def test_normalised_read(self):
        num, den = randn(2, 3, 2, 4), (torch.rand(2, 3, 2, dtype=D) + 0.1).requires_grad_()
        self.check(lambda n, d: seqmix.normalised_read(n, d, 1e-6), lambda n, d: n / d[..., None], (num, den))


class ExactLinearAttention(OpCase):
    def test_kernels(self):
        q, k, v = randn(2, 6, 2, 3, scale=0.5), randn(2, 6, 2, 3, scale=0.5), randn(2, 6, 2, 2)
        for kernel in ("hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude"):
            for causal in (True, False):
                for impl in op_impls("ela"):
                    with self.subTest(kernel=kernel, causal=causal, impl=impl):
                        self.check(lambda q, k, v: seqmix.ela(q, k, v, kernel, causal, 1e-8, impl),
                                   lambda q, k, v: ela_ref(q, k, v, kernel, causal), (q, k, v))

    def test_unknown_kernel(self):
        with self.assertRaisesRegex(RuntimeError, "nope"):
            seqmix.ela(*(torch.randn(1, 2, 1, 2) for _ in range(3)), kernel="nope")


class HyperMLPRead(OpCase):
    def mixing(self, heads, length, rank):
        return (randn(heads, length, scale=0.3), randn(heads, length, rank, scale=0.3), randn(heads, rank, length, scale=0.3))

    def test_dplr_mixing_both_sides_both_layouts(self):
        B, T, H, d, L, r = 1, 5, 2, 3, 7, 2
        q, k, v = randn(B, T, H, d), randn(B, T, H, d), randn(B, T, H, 2)
        s1, s2 = torch.rand(B, T, H, r, dtype=D).requires_grad_(), torch.rand(B, T, H, r, dtype=D).requires_grad_()
        m1, m2 = self.mixing(H, L, r), self.mixing(H, L, r)
        for layout in ("lag", "forward"):
            for impl in op_impls("hypermlp_read"):
                with self.subTest(layout=layout, impl=impl):
                    def op(q, k, v, s1, d1, u1, vt1, s2, d2, u2, vt2):
                        return seqmix.hypermlp_read(q, k, v, s1, (d1, u1, vt1), s2, (d2, u2, vt2), "relu", layout,
                                                    1e-12, 1.0, 2, impl)

                    def reference(q, k, v, s1, d1, u1, vt1, s2, d2, u2, vt2):
                        return hypermlp_ref(q, k, v, s1, (d1, u1, vt1), s2, (d2, u2, vt2), "relu", layout, 1e-12, 1.0)

                    self.check(op, reference, (q, k, v, s1, *m1, s2, *m2))

    def test_glu_and_softmax_activations(self):
        B, T, H, d = 2, 4, 1, 3
        v = randn(B, T, H, 2)
        for activation, heads in (("glu", 2 * H), ("softmax", H)):
            q, k = randn(B, T, heads, d), randn(B, T, heads, d)
            with self.subTest(activation=activation):
                self.check(lambda q, k, v: seqmix.hypermlp_read(q, k, v, activation=activation, scale=0.5),
                           lambda q, k, v: hypermlp_ref(q, k, v, None, None, None, None, activation, "lag", 1e-12, 0.5),
                           (q, k, v))


class SecondOrderReads(OpCase):
    def test_mha2nd1st(self):
        q, k = randn(2, 5, 2, 3), randn(2, 5, 2, 3)
        temperature = (torch.rand(2, dtype=D) + 0.5).requires_grad_()
        bias = randn(2)
        for impl in op_impls("mha2nd1st_read"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, t, c: seqmix.mha2nd1st_read(q, k, t, c, True, impl),
                           lambda q, k, t, c: mha2nd1st_ref(q, k, t, c, True), (q, k, temperature, bias))

    def test_light2nd1st(self):
        q, k, v = randn(1, 6, 2, 3), randn(1, 6, 2, 3), randn(1, 6, 2, 2)
        tau = randn(2)
        for impl in op_impls("light2nd1st_read"):
            with self.subTest(impl=impl):
                self.check(lambda q, k, v, tau: seqmix.light2nd1st_read(q, k, v, 0.8, tau, True, impl),
                           lambda q, k, v, tau: light2nd1st_ref(q, k, v, 0.8, tau, True), (q, k, v, tau))


class EveryOpHasAWrapper(unittest.TestCase):
    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

    def generator(self):
        spec = importlib.util.spec_from_file_location(
            "generate_op_wrappers", os.path.join(self.ROOT, "scripts", "generate_op_wrappers.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def test_the_entry_points_are_what_the_schemas_generate(self):
        """python/seqmix/_op_wrappers.py, include/seqmix/ops/operators.h, src/ops/operators.cpp,
        src/ops/common/kernel_operators.h and src/ops/common/operator_calls.h are the generator's output for the
        operators the sources define: a new or changed operator needs `scripts/generate_op_wrappers.py` run, not an
        entry point or a kernel's signature written."""
        result = subprocess.run([sys.executable, os.path.join(self.ROOT, "scripts", "generate_op_wrappers.py"), "--check"],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_the_generator_reads_the_schemas_and_docs_the_library_registers(self):
        """The generator reads each schema and doc from the string literals of define_op and define_kernel; the
        library registers them from the same literals. Every registered seqmix operator but the package's own is
        read, with the registered schema and doc."""
        found = self.generator().declarations()
        registered = {s.name.split("::")[1]: s for s in torch._C._jit_get_all_schemas() if s.name.startswith("seqmix::")}
        docs = {op["name"]: op["doc"] for family in seqmix.op_table()["families"] for op in family["torch_ops"]}
        self.assertEqual({d["name"] for d in found} | {"op_table"} | set(seqmix.ops.PACKAGE_OPS), set(registered))
        for d in found:
            with self.subTest(op=d["name"]):
                self.assertEqual(str(d["schema"]), str(registered[d["name"]]).replace("seqmix::", "", 1))
                if d["kind"] == "op":
                    self.assertEqual(d["doc"], docs[d["name"]])

    def test_the_generator_refuses_a_definition_it_cannot_read_naming_the_file_and_line(self):
        generator = self.generator()
        cases = {
            "schema_in_a_variable": ('define_op<&f>(m, kSchema, "doc");', "schema must be string literals"),
            "no_doc": ('define_op<&f>(m, "f(Tensor x) -> Tensor");', "operator f has no doc"),
            "bad_schema": ('define_op<&f>(m, "f(Tensor x -> Tensor", "doc");', "the schema does not parse"),
            "kernel_name": ('define_kernel<&c, &m2>(m, "f(Tensor x) -> Tensor[]");', "kernel operators"),
            "twice": ('define_op<&f>(m, "f(Tensor x) -> Tensor", "a");\ndefine_op<&g>(m, "f(Tensor y) -> Tensor", "b");',
                      "operator f is defined twice"),
        }
        for name, (text, expected) in cases.items():
            with self.subTest(case=name), tempfile.TemporaryDirectory() as root:
                os.makedirs(os.path.join(root, "family"))
                with open(os.path.join(root, "family", "declare.cpp"), "w") as f:
                    f.write("// a family\n" + text + "\n")
                generator.OPS_SOURCES = root
                with self.assertRaises(SystemExit) as raised:
                    generator.declarations()
                self.assertIn(expected, str(raised.exception))
                self.assertIn("declare.cpp:2", str(raised.exception))

    def test_the_op_table_the_registered_ops_and_the_wrappers_agree(self):
        """A new op in an op family's declare.cpp needs a wrapper in python/seqmix/ops.py (and a test here)."""
        registered = {s.name.split("::")[1] for s in torch._C._jit_get_all_schemas() if s.name.startswith("seqmix::")}
        kernels = {name for name in registered if name.startswith("_")}  # the fused kernels as operators (internal)
        self.assertGreaterEqual(len(kernels), 12)
        registered -= kernels
        table = {op["name"] for family in seqmix.op_table()["families"] for op in family["torch_ops"]}
        self.assertEqual(registered, table | {"op_table"} | set(seqmix.ops.PACKAGE_OPS))
        wrapped = {name for name in seqmix.ops.__all__ if name not in seqmix.ops.PYTHON_ONLY}
        self.assertEqual(wrapped, table | {"op_table", "read_safetensors_cpp"})

    def test_the_table_lists_each_family_s_operators_as_the_sources_define_them(self):
        """The op table's operators are those define_op registers, under the folder that defines them, in
        definition order: no family lists them by hand."""
        found = self.generator().operators(self.generator().declarations())
        table = [(family["name"], op["name"]) for family in seqmix.op_table()["families"] for op in family["torch_ops"]]
        self.assertEqual(table, [(d["family"], d["name"]) for d in found])

    def test_every_op_with_impls_is_tested_in_each(self):
        """Each op with an impl argument is called here with every impl the table gives it."""
        source = open(__file__).read()
        for family in seqmix.op_table()["families"]:
            for op in family["torch_ops"]:
                if op["impls"]:
                    self.assertIn('op_impls("%s")' % op["name"], source, op["name"])


if __name__ == "__main__":
    unittest.main()
