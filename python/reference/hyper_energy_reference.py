"""Plain-PyTorch references for HyperMLP / HyperGLU, MHA2nd1st, LightMHA2nd1st and the energy framework.

Written from the papers (hypermlp_paper.txt, energy_attention_paper.txt), /work/shared/specs/hypermlp_energy_ela.md
and seqmix's documented choices (docs/hypermlp.md, docs/energy.md, specs/README.md decisions), independently of
seqmix's kernels: every function here imports torch only and takes its weights as a dict keyed by the C++
layer's state_dict names. Row vectors throughout; B batch, T length, D width, H heads.

Where a formula has an O(N d) "practical" form and an explicit one, these references use the explicit one
(materialised covariance matrices, materialised per-query sequence-mixing matrices, rotation matrices,
closed-form energy gradients instead of autograd), so they are a second derivation, not a restatement.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


# ----------------------------------------------------------------------------------------------------------
# Shared pieces


def linear(x, weights, name, bias):
    """x W^T (+ b): weights[name + '.weight'] is [out, in] (torch.nn.Linear layout)."""
    y = x @ weights[name + ".weight"].t()
    return y + weights[name + ".bias"] if bias else y


def rotation_matrices(length, dim, theta, dtype):
    """RoPE as explicit rotations, [length, dim, dim]: channel i pairs with channel i + dim/2 ("half split",
    seqmix decision 4: a true rotation) and the pair turns by angle pos * theta^(-2i/dim), i < dim/2:
        (x_i, x_{i+dim/2}) -> (x_i cos a - x_{i+dim/2} sin a,  x_i sin a + x_{i+dim/2} cos a)."""
    half = dim // 2
    i = torch.arange(half, dtype=dtype)
    freq = theta ** (-2.0 * i / dim)                                   # [dim/2]
    angle = torch.arange(length, dtype=dtype)[:, None] * freq[None]    # [length, dim/2]
    cos, sin = torch.cos(angle), torch.sin(angle)
    R = torch.zeros(length, dim, dim, dtype=dtype)
    lo, hi = torch.arange(half), torch.arange(half) + half
    R[:, lo, lo] = cos
    R[:, lo, hi] = -sin
    R[:, hi, lo] = sin
    R[:, hi, hi] = cos
    return R


def rope(x, theta):
    """x [B,T,H,d] at positions 0..T-1 -> R_t x_t."""
    R = rotation_matrices(x.shape[1], x.shape[-1], theta, x.dtype)
    return torch.einsum("tij,bthj->bthi", R, x)


def heads_of(x, heads):
    """[..., H*d] -> [..., H, d]; head h owns the contiguous channels [h d, (h+1) d)."""
    return x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)


def visibility(T, causal):
    """[T(query), T(key)] bool: key c is visible to query t (c <= t when causal)."""
    full = torch.ones(T, T, dtype=torch.bool)
    return torch.tril(full) if causal else full


# ----------------------------------------------------------------------------------------------------------
# HyperMLP / HyperGLU (hypermlp_paper.txt §2.4, App. F/G/J; docs/hypermlp.md)


@dataclass
class HyperLabel:
    base: str          # 'S' softmax, 'R' ReLU o L2Norm, 'G' GLU
    rope: bool         # p
    conv: bool         # c
    gates: bool        # g
    mix_before: bool   # 1: R1 before the activation
    mix_after: bool    # 2: R2 after it
    lag: bool          # o: lag (reverse-offset) layout


def parse_hyper_label(label):
    """Table 1 label Base[-Feat][-Rank][-Mix][!] -> HyperLabel. Ranks are read off the weights' shapes."""
    parts = label.rstrip("!").split("-")
    feat, mix = "", ""
    for part in parts[1:]:
        if part[0].isdigit():
            mix = part
        elif part not in ("q", "v"):
            feat = part
    return HyperLabel(base=parts[0], rope="p" in feat, conv="c" in feat, gates="g" in feat,
                      mix_before="1" in mix, mix_after="2" in mix, lag="o" in mix)


def causal_depthwise_conv(x, weight):
    """Kernel-K depthwise causal conv without bias: y_t[c] = sum_j weight[c, j] x_{t-K+1+j}[c] (zeros before 0).
    x [B,T,D], weight [D,K]; tap K-1 is the current token."""
    K = weight.shape[1]
    y = torch.zeros_like(x)
    for j in range(K):
        shift = K - 1 - j  # tap j reads x_{t - shift}
        shifted = torch.cat([torch.zeros_like(x[:, :shift]), x[:, : x.shape[1] - shift]], 1)
        y = y + shifted * weight[:, j]
    return y


def sequence_mixers(weights, name, s, lag, visible):
    """The per-query DPLR mixers R_t, materialised in key order, [B,Hm,T(query),T(key c),T(key c')]:

        R_t[c, c'] = (1 + p[P_t(c)]) delta_{c c'} + sum_k U[P_t(c), k] s_t[k] Vt[k, P_t(c')]

    restricted to the visible keys c, c' <= t (the paper's t x t matrix embedded in T x T). The parameter
    row of key c for the query at t is P_t(c) = Lmax - 1 - (t - c) in the lag layout (the current token on
    the last row; docs/hypermlp.md) and P_t(c) = c, the absolute position, in the forward layout (seqmix's
    documented departure from the authors' code, which uses Lmax - T + c). s [B,Hm,T,r] are the controls.
    A row vector h over the keys is mixed as h R_t (docs: R2 here is the paper's R2^T, a reparameterisation)."""
    p, U, Vt = weights[name + "_diag"], weights[name + "_U"], weights[name + "_Vt"]  # [Hm,L] [Hm,L,r] [Hm,r,L]
    Lmax = p.shape[1]
    T = visible.shape[0]
    t = torch.arange(T)[:, None]
    c = torch.arange(T)[None, :]
    rows = (Lmax - 1 - (t - c)) if lag else c.expand(T, T)
    rows = rows.clamp(0, Lmax - 1)                      # hidden keys (c > t) are masked below
    diag = 1 + p[:, rows]                               # [Hm,T,T]
    Ur = U[:, rows, :]                                  # [Hm,T,T,r]   U[P_t(c)]
    Vr = Vt[:, :, rows].permute(0, 2, 1, 3)             # [Hm,T,r,T]   Vt[:, P_t(c')]
    low_rank = torch.einsum("htck,bhtk,htkd->bhtcd", Ur, s, Vr)
    R = torch.diag_embed(diag).unsqueeze(0) + low_rank
    mask = (visible[:, :, None] & visible[:, None, :]).to(R.dtype)  # [T,T,T]
    return R * mask


def hypermlp_reference(x, weights, *, label, heads, rope_theta=10000.0, eps=1e-12, bias=False):
    """HyperMLP / HyperGLU, one layer (causal). x [B,T,D] -> [B,T,D].

    Per value head (HyperGLU: score heads j (gate) and H + j (scale) feed value head j), for the query t:
        q_t = RoPE(x_t W_q) * sigmoid(x_t W_M1 + b)      RoPE (p) before the gate (g); k is not gated
        k_c = RoPE(conv_k(x)_c W_k),  v_c = conv_v(x)_c W_v                            (conv with c)
        z_t[c] = q_t . k_c  (c <= t; times 1/sqrt(d_qk) for S only)
        h_t = z_t R1_t(x_t),   R_j = Diag(1 + p_j) + U_j Diag(sigmoid(x_t W_Sj + b)) Vt_j   (with 1)
        a_t = ReLU(h_t / sqrt(||h_t||^2 + eps))                         R (paper: ReLU(L2Norm(h)))
            = Softplus(h_scale) * ReLU(h_gate / sqrt(||h_gate||^2 + eps))   G (paper eq 11)
            = softmax(h_t) over the visible keys                          S
        w_t = a_t R2_t(x_t)                                                               (with 2)
        o_t = (sum_c w_t[c] v_c) * sigmoid(x_t W_M2 + b),   y_t = [o_t]_heads W_o
    L2Norm with eps under the square root is the paper's (docs: seqmix departs from the code's max(||h||, eps)).
    """
    v = parse_hyper_label(label)
    B, T, D = x.shape
    score_heads = 2 * heads if v.base == "G" else heads
    visible = visibility(T, causal=True)                                  # [T,T]

    xk = causal_depthwise_conv(x, weights["conv_k.weight"]) if v.conv else x
    xv = causal_depthwise_conv(x, weights["conv_v.weight"]) if v.conv else x
    q = heads_of(linear(x, weights, "wq", bias), score_heads)             # [B,T,Hs,dqk]
    k = heads_of(linear(xk, weights, "wk", bias), score_heads)            # [B,T,Hs,dqk]
    val = heads_of(linear(xv, weights, "wv", bias), heads)                # [B,T,H,dvo]
    if v.rope:
        q, k = rope(q, rope_theta), rope(k, rope_theta)
    if v.gates:
        q = q * heads_of(torch.sigmoid(linear(x, weights, "qk_gate", True)), score_heads)

    vis = visible.to(x.dtype)
    z = torch.einsum("bthd,bchd->bhtc", q, k) * vis                       # [B,Hs,T,T]
    if v.base == "S":
        z = z / math.sqrt(q.shape[-1])
    h = z
    if v.mix_before:
        s1 = heads_of(torch.sigmoid(linear(x, weights, "control1", True)), score_heads).transpose(1, 2)
        h = torch.einsum("bhtc,bhtcd->bhtd", z, sequence_mixers(weights, "mix1", s1, v.lag, visible))

    if v.base == "S":
        a = torch.softmax(h.masked_fill(~visible, float("-inf")), -1)
    elif v.base == "R":
        a = torch.relu(h / torch.sqrt((h * h * vis).sum(-1, keepdim=True) + eps))
    else:  # G: first `heads` score heads are the gates, the last `heads` the scales (spec 1.2 step 7)
        gate, scale = h[:, :heads], h[:, heads:]
        a = F.softplus(scale) * torch.relu(gate / torch.sqrt((gate * gate * vis).sum(-1, keepdim=True) + eps))
    a = a * vis                                                           # [B,H,T,T]

    w = a
    if v.mix_after:
        s2 = heads_of(torch.sigmoid(linear(x, weights, "control2", True)), heads).transpose(1, 2)
        w = torch.einsum("bhtc,bhtcd->bhtd", a, sequence_mixers(weights, "mix2", s2, v.lag, visible))
    o = torch.einsum("bhtc,bchd->bthd", w, val)                           # [B,T,H,dvo]
    if v.gates:
        o = o * heads_of(torch.sigmoid(linear(x, weights, "vo_gate", True)), heads)
    return linear(o.reshape(B, T, -1), weights, "wo", bias)


# ----------------------------------------------------------------------------------------------------------
# MHA2nd1st and LightMHA2nd1st (energy_attention_paper.txt §3.2, App. A.3; docs/energy.md)


def weighted_covariance(p, vecs):
    """Cov_p(vecs) per query, explicit: sum_i p_i (x_i - xbar)(x_i - xbar)^T (paper eq 23's d_i d_i^T).
    p [B,H,T,S], vecs [B,S,H,d] -> mean [B,H,T,d], covariance [B,H,T,d,d]."""
    mean = torch.einsum("bhts,bshd->bhtd", p, vecs)
    dev = vecs.permute(0, 2, 1, 3)[:, :, None] - mean[:, :, :, None]     # [B,H,T,S,d]
    cov = torch.einsum("bhts,bhtsi,bhtsj->bhtij", p, dev, dev)
    return mean, cov


def mha2nd1st_reference(x, weights, *, heads, rope_on=True, rope_theta=10000.0, bias=True, causal=True,
                        bias_temperature="multiplier"):
    """MHA2nd1st (paper eq 23/24 with seqmix's documented parameterisation). x [B,T,D] -> [B,T,D].

    Per head h, with A_t = R_t W_Q,h (the query map; R_t the RoPE rotation of the query's position, I without
    RoPE) and q_t = A_t z_t (+ b_q), k_i = R_i W_K,h h_i (+ b_k):
        p_i = softmax_i(-||q - k_i||^2 / (2 T_h))           Euclidean scores, T_h = temperature[h]
        kbar = sum_i p_i k_i,   u = q - kbar
        b = c_h Cov_p(k) u      (c_h = bias_temperature[h]; 'divisor' reads b = Cov_p(k) u / c_h)
        r = A_t^+ (u + b),      A^+ = A^T (A A^T)^-1   (range-space Newton step; the paper's M_h = W_Q,h^+,
                                with RoPE the pseudo-inverse of the rotated map, docs/energy.md)
        y = W_O [W_V,h r_h]_h (+ b_O)       W_V,h = value_weight[h] [d_h, D] acts on r_h, never on values.
    qk.weight is [W_Q; W_K] stacked [2D, D]."""
    B, T, D = x.shape
    dh = D // heads
    W = weights["qk.weight"]
    WQ = W[:D].reshape(heads, dh, D)                                       # [H,dh,D]
    qk = linear(x, weights, "qk", bias)
    q, k = heads_of(qk[..., :D], heads), heads_of(qk[..., D:], heads)      # [B,T,H,dh]
    R = rotation_matrices(T, dh, rope_theta, x.dtype) if rope_on else torch.eye(dh, dtype=x.dtype).expand(T, dh, dh)
    q = torch.einsum("tij,bthj->bthi", R, q)
    k = torch.einsum("tij,bthj->bthi", R, k)

    temperature = weights["temperature"]                                   # [H]
    dist2 = ((q.permute(0, 2, 1, 3)[:, :, :, None] - k.permute(0, 2, 1, 3)[:, :, None]) ** 2).sum(-1)  # [B,H,T,S]
    logits = -dist2 / (2 * temperature[None, :, None, None])
    p = torch.softmax(logits.masked_fill(~visibility(T, causal), float("-inf")), -1)
    kbar, cov = weighted_covariance(p, k)                                  # [B,H,T,dh], [B,H,T,dh,dh]
    u = q.permute(0, 2, 1, 3) - kbar
    c = weights["bias_temperature"][None, :, None, None]
    cov_u = torch.einsum("bhtij,bhtj->bhti", cov, u)
    b = c * cov_u if bias_temperature == "multiplier" else cov_u / c
    A = torch.einsum("tij,hjd->htid", R, WQ)                               # [H,T,dh,D]
    gram = A @ A.transpose(-1, -2)                                         # [H,T,dh,dh]
    solved = torch.linalg.solve(gram[None], (u + b).unsqueeze(-1))         # [B,H,T,dh,1]
    r = (A.transpose(-1, -2)[None] @ solved).squeeze(-1)                   # [B,H,T,D]
    values = torch.einsum("hed,bhtd->bthe", weights["value_weight"], r)    # [B,T,H,dh]
    return linear(values.reshape(B, T, D), weights, "out", bias)


def light2nd1st_reference(x, weights, *, heads, rope_on=True, rope_theta=10000.0, bias=True, causal=True):
    """LightMHA2nd1st (paper App. A.3.2, the centred form before eq 604). x [B,T,D] -> [B,T,D].
        p_i = softmax_i(q . k_i / sqrt(d_h)),   v_i = W_V,h h_i,   vbar = sum_i p_i v_i
        b = sum_i p_i (v_i - vbar)(v_i - vbar)^T vbar = Cov_p(v) vbar
        y = W_O [vbar_h + tau_h b_h]_h (+ b_O)
    qkv.weight is [W_Q; W_K; W_V] stacked [3D, D]; RoPE on q and k (docs: on by default, as the softmax baseline)."""
    B, T, D = x.shape
    qkv = linear(x, weights, "qkv", bias)
    q, k, v = (heads_of(qkv[..., i * D:(i + 1) * D], heads) for i in range(3))
    if rope_on:
        q, k = rope(q, rope_theta), rope(k, rope_theta)
    logits = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D // heads)
    p = torch.softmax(logits.masked_fill(~visibility(T, causal), float("-inf")), -1)
    vbar, cov = weighted_covariance(p, v)
    b = torch.einsum("bhtij,bhtj->bhti", cov, vbar)
    read = vbar + weights["tau"][None, :, None, None] * b                 # [B,H,T,dh]
    return linear(read.permute(0, 2, 1, 3).reshape(B, T, D), weights, "out", bias)


# ----------------------------------------------------------------------------------------------------------
# The energy framework (energy_attention_paper.txt §2, App. A.3.1; docs/energy.md)


def local_energy_and_slope(q, k, local, p_exp=1.5, delta=1.0):
    """E_i(q, k_i) and dE_i/dq in closed form. q [B,H,T,d], k [B,H,S,d] -> E [B,H,T,S], dE [B,H,T,S,d].
        neg_inner -q.k       abs_inner |q.k|       half_sq_distance ||q - k||^2 / 2
        lp ||q - k||_p^p     huber 1/2 r^2 (r <= delta) else delta (r - delta/2), r = ||q - k||"""
    if local in ("neg_inner", "abs_inner"):
        inner = torch.einsum("bhtd,bhsd->bhts", q, k)
        kk = k[:, :, None].expand(-1, -1, q.shape[2], -1, -1)             # [B,H,T,S,d]
        if local == "neg_inner":
            return -inner, -kk
        return inner.abs(), torch.sign(inner)[..., None] * kk
    diff = q[:, :, :, None] - k[:, :, None]                                # [B,H,T,S,d]
    if local == "half_sq_distance":
        return 0.5 * (diff * diff).sum(-1), diff
    if local == "lp":
        return (diff.abs() ** p_exp).sum(-1), p_exp * diff.abs() ** (p_exp - 1) * torch.sign(diff)
    if local == "huber":
        r = torch.sqrt((diff * diff).sum(-1))
        inside = r <= delta
        E = torch.where(inside, 0.5 * r * r, delta * (r - 0.5 * delta))
        slope = torch.where(inside[..., None], diff, delta * diff / r.clamp_min(1e-300)[..., None])
        return E, slope
    raise ValueError(f"unknown local energy {local}")


def forgetting_weights(h, weights, heads):
    """gated_sum_squares: gamma_{t,i} = prod_{r=i+1..t} sigmoid(w_h . h_r + b_h), [B,H,T,S]
    (empty product 1 at i = t; zero for invisible i > t)."""
    T = h.shape[1]
    log_gate = F.logsigmoid(linear(h, weights, "gate", True))            # [B,S,H]
    r = torch.arange(T)
    between = ((r[None, None, :] > r[None, :, None]) & (r[None, None, :] <= r[:, None, None])).to(h.dtype)  # [t,i,r]
    log_gamma = torch.einsum("tir,brh->bhti", between, log_gate)
    return torch.exp(log_gamma) * visibility(T, True).to(h.dtype)


def energy_gradient(z, ctx, weights, *, heads, local, global_, temperature, p_exp=1.5, delta=1.0):
    """dF/dz for F = (1/H) sum_h F_h(q_h = W1,h z; k_i = W2,h h_i), by the chain rule (no autograd):
        helmholtz         F_h = -T log sum_i exp(-E_i/T)   -> dF_h/dq = sum_i softmax_i(-E/T) dE_i/dq
        neg_sum_squares   F_h = -T/2 sum_i E_i^2            -> dF_h/dq = -T sum_i E_i dE_i/dq
        gated_sum_squares F_h = -T/2 sum_i gamma_i E_i^2    -> dF_h/dq = -T sum_i gamma_i E_i dE_i/dq
        dF/dz = (1/H) sum_h W1,h^T dF_h/dq_h.     z [B,T,D] queries, ctx [B,T,D] context (causal)."""
    B, T, D = z.shape
    dh = D // heads
    W1 = weights["w1.weight"].reshape(heads, dh, D)
    q = heads_of(linear(z, weights, "w1", False), heads).transpose(1, 2)      # [B,H,T,dh]
    k = heads_of(linear(ctx, weights, "w2", False), heads).transpose(1, 2)    # [B,H,S,dh]
    E, slope = local_energy_and_slope(q, k, local, p_exp, delta)
    visible = visibility(T, True)
    if global_ == "helmholtz":
        weight = torch.softmax((-E / temperature).masked_fill(~visible, float("-inf")), -1)
    elif global_ == "neg_sum_squares":
        weight = -temperature * E * visible.to(z.dtype)
    elif global_ == "gated_sum_squares":
        weight = -temperature * E * forgetting_weights(ctx, weights, heads)
    else:
        raise ValueError(f"unknown global energy {global_}")
    dF_dq = torch.einsum("bhts,bhtsd->bhtd", weight, slope)                   # [B,H,T,dh]
    return torch.einsum("hed,bhte->btd", W1, dF_dq) / heads


def newton_taylor_direction(z, ctx, weights, *, heads, temperature):
    """helmholtz + half_sq_distance: the Hessian of F_h is W1^T [I - Cov_p(k)/T] W1 (paper eq 19); its
    range-space inverse applied to the gradient W1^T u (u = q - kbar) with [I - C/T]^-1 ~ I + C/T
    (eq 22) gives W1^+ (u + Cov_p(k) u / T). Returns (1/H) sum_h of that, [B,T,D]."""
    B, T, D = z.shape
    dh = D // heads
    W1 = weights["w1.weight"].reshape(heads, dh, D)
    q = heads_of(linear(z, weights, "w1", False), heads)                   # [B,T,H,dh]
    k = heads_of(linear(ctx, weights, "w2", False), heads)
    dist2 = ((q.transpose(1, 2)[:, :, :, None] - k.transpose(1, 2)[:, :, None]) ** 2).sum(-1)
    p = torch.softmax((-dist2 / (2 * temperature)).masked_fill(~visibility(T, True), float("-inf")), -1)
    kbar, cov = weighted_covariance(p, k)
    u = q.transpose(1, 2) - kbar
    direction = u + torch.einsum("bhtij,bhtj->bhti", cov, u) / temperature
    W1_pinv = W1.transpose(1, 2) @ torch.linalg.inv(W1 @ W1.transpose(1, 2))   # [H,D,dh]
    return torch.einsum("hde,bhte->btd", W1_pinv, direction) / heads


def newton_exact_direction(z, ctx, weights, *, heads, temperature):
    """helmholtz + half_sq_distance, the full Newton step of each head (paper eqs 18-21, no Taylor step):
    the range-space inverse of W1^T A W1 (A = I - Cov_p(k)/T) applied to the gradient W1^T u is
    W1^+ A^-1 u. Returns (1/H) sum_h of that, [B,T,D]. (The energy mixer's `newton` takes an autograd Hessian
    and its pseudo-inverse, which equals this when W1,h has full row rank and A is invertible.)"""
    B, T, D = z.shape
    dh = D // heads
    W1 = weights["w1.weight"].reshape(heads, dh, D)
    q = heads_of(linear(z, weights, "w1", False), heads)
    k = heads_of(linear(ctx, weights, "w2", False), heads)
    dist2 = ((q.transpose(1, 2)[:, :, :, None] - k.transpose(1, 2)[:, :, None]) ** 2).sum(-1)
    p = torch.softmax((-dist2 / (2 * temperature)).masked_fill(~visibility(T, True), float("-inf")), -1)
    kbar, cov = weighted_covariance(p, k)
    u = q.transpose(1, 2) - kbar
    A = torch.eye(dh, dtype=z.dtype) - cov / temperature                  # [B,H,T,dh,dh]
    direction = torch.linalg.solve(A, u.unsqueeze(-1)).squeeze(-1)
    W1_pinv = torch.linalg.pinv(W1)                                         # [H,D,dh]
    return torch.einsum("hde,bhte->btd", W1_pinv, direction) / heads


def energy_reference(x, weights, *, heads, local="neg_inner", global_="helmholtz", optimizer="gd", steps=1,
                     eta=1.0, beta=0.9, temperature=0.0, p_exp=1.5, delta=1.0):
    """The energy mixer: z_0 = x moves by `steps` optimiser steps on F(z; h_1..h_t) with the context h = x
    (fixed), and the mixer returns z_K - z_0.
        gd             z <- z - eta g
        momentum       m <- beta m + g,            z <- z - eta m     (eta in the z update, paper footnote 1)
        nesterov       m <- beta m + g(z - beta m), z <- z - eta m
        newton_taylor  z <- z - eta (1/H) sum_h W1,h^+ (u_h + Cov_p(k_h) u_h / T)
        newton         z <- z - eta (1/H) sum_h W1,h^+ (I - Cov_p(k_h)/T)^-1 u_h   (helmholtz + half_sq_distance)
    T = temperature, or sqrt(D/H) when 0 (docs/energy.md)."""
    D = x.shape[-1]
    T = temperature if temperature > 0 else math.sqrt(D // heads)
    kw = dict(heads=heads, local=local, global_=global_, temperature=T, p_exp=p_exp, delta=delta)
    z, m = x, torch.zeros_like(x)
    for _ in range(steps):
        if optimizer == "gd":
            z = z - eta * energy_gradient(z, x, weights, **kw)
        elif optimizer == "momentum":
            m = beta * m + energy_gradient(z, x, weights, **kw)
            z = z - eta * m
        elif optimizer == "nesterov":
            m = beta * m + energy_gradient(z - beta * m, x, weights, **kw)
            z = z - eta * m
        elif optimizer == "newton_taylor":
            z = z - eta * newton_taylor_direction(z, x, weights, heads=heads, temperature=T)
        elif optimizer == "newton" and local == "half_sq_distance" and global_ == "helmholtz":
            z = z - eta * newton_exact_direction(z, x, weights, heads=heads, temperature=T)
        else:
            raise ValueError(f"no reference for optimizer {optimizer} with {local} + {global_}")
    return z - x
