"""Independent plain-PyTorch references for seqmix's baseline sequence mixers and two building blocks.

Written from the papers' equations and seqmix's documented choices (the registry's option texts in `seqmix list`,
the layer headers' comments, `specs/README.md`), not from the C++ kernels: every mixer here is the defining formula
(an explicit weight matrix, or the recurrence of the paper) computed step by step, in whatever dtype it is given
(the tests use float64). This file imports torch only; it never imports seqmix.

Every mixer takes x [B,T,D] and `weights`, a mapping from seqmix's parameter names (the layer's `state_dict()`
keys) to tensors, and returns y [B,T,D]. A Linear "name" is y = x W^T + b with W = weights["name.weight"]
[out,in] and b = weights.get("name.bias") (absent when the mixer was built with bias=0).

Shapes: B batch, T positions, D width, H heads, d = D / H the head width, E inner SSM channels, N SSM state.

Contents
  rotary(x, theta, offset)                 RoPE, half-split pairs (specs/README.md decision 4)
  rms_norm(x, weight, eps)                 RMSNorm
  softmax_mixer / relu_mixer / linear_mixer / gla_mixer / delta_mixer / ssm_mixer
"""
import math

import torch

# seqmix's RMSNorm epsilon (the lm model's norms are RMSNorm(dim) with the default eps).
RMS_NORM_EPS = 1e-5


# ----------------------------------------------------------------------------------------------------------------
# Building blocks


def linear(x, weights, name):
    """The Linear `name`: x W^T (+ b). W [out,in], b [out] or absent."""
    y = x @ weights[name + ".weight"].transpose(0, 1)
    bias = weights.get(name + ".bias")
    return y if bias is None else y + bias


def split_heads(x, heads):
    """[B,T,H*d] -> [B,T,H,d]: head h owns channels h*d .. h*d+d-1."""
    return x.reshape(*x.shape[:-1], heads, x.shape[-1] // heads)


def merge_heads(x):
    """[B,T,H,d] -> [B,T,H*d]."""
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


def rotary(x, theta=10000.0, offset=0):
    """Rotary position embedding (RoFormer, Su et al.) as a true rotation of channel pairs.

    x [B,T,H,d], d even; the token at index t has position p = offset + t. seqmix pairs channel i with channel
    i + d/2 ("half split", specs/README.md decision 4: RoPE is a true rotation everywhere; the FEM authors' code
    mixes two frequencies within a pair, which seqmix does not reproduce). Pair i turns by the angle

        phi_{p,i} = p * theta^(-2i/d),            i = 0 .. d/2 - 1

        x'_i       = x_i cos(phi) - x_{i+d/2} sin(phi)
        x'_{i+d/2} = x_{i+d/2} cos(phi) + x_i sin(phi)

    so |x'| = |x| and q'_s . k'_t depends on s - t only.
    """
    d = x.shape[-1]
    half = d // 2
    out = torch.empty_like(x)
    for i in range(half):
        inverse_frequency = theta ** (-2.0 * i / d)
        for t in range(x.shape[1]):
            angle = (offset + t) * inverse_frequency
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[:, t, :, i], x[:, t, :, i + half]
            out[:, t, :, i] = a * c - b * s
            out[:, t, :, i + half] = b * c + a * s
    return out


def rms_norm(x, weight, eps=RMS_NORM_EPS):
    """RMSNorm (Zhang & Sennrich): y = x / sqrt(mean_j x_j^2 + eps) * weight, over the last axis.

    x [..., D], weight [D]. eps sits under the square root, added to the mean square.
    """
    mean_square = (x * x).sum(-1, keepdim=True) / x.shape[-1]
    return x / torch.sqrt(mean_square + eps) * weight


def causal_visibility(T, device=None):
    """[T,T] bool: query t sees key j iff j <= t."""
    t = torch.arange(T, device=device)
    return t[None, :] <= t[:, None]


def project_qkv(x, weights, heads, rope, rope_theta):
    """The baseline mixers' packed projection "qkv" = [q | k | v] (three D-wide blocks, in that order), split into
    heads; RoPE (positions 0..T-1) on q and k when `rope`. Returns q, k, v [B,T,H,d]."""
    D = x.shape[-1]
    qkv = linear(x, weights, "qkv")
    q, k, v = (split_heads(qkv[..., i * D:(i + 1) * D], heads) for i in range(3))
    if rope:
        q, k = rotary(q, rope_theta), rotary(k, rope_theta)
    return q, k, v


def feature_map(x, feature, eps):
    """The linear-attention feature maps: relu -> ReLU(x) + eps, elu -> ELU(x) + 1 (Katharopoulos et al.),
    identity -> x (gla with normalize=0 only)."""
    if feature == "relu":
        return torch.clamp(x, min=0.0) + eps
    if feature == "elu":
        return torch.where(x > 0, x + 1.0, torch.exp(x))   # ELU(x) + 1 = x + 1 (x > 0), e^x (x <= 0)
    if feature == "identity":
        return x
    raise ValueError(f"unknown feature map {feature!r}")


# ----------------------------------------------------------------------------------------------------------------
# Softmax attention (the S baseline)


def softmax_mixer(x, weights, heads=4, rope=True, rope_theta=10000.0, causal=True, scale=0.0):
    """Multi-head softmax attention (Vaswani et al.), seqmix's `softmax` mixer.

        q, k, v = split_heads(W_qkv x + b_qkv)              [B,T,H,d] each; RoPE on q and k (positions 0..T-1)
        p_tj    = exp(s q_t . k_j) / sum_{j' visible} exp(s q_t . k_j')    j visible: j <= t (causal) or all j
        o_t     = sum_j p_tj v_j
        y       = W_out merge_heads(o) + b_out

    s = `scale`, or 1/sqrt(d) when scale is 0 (the registry's default).
    """
    B, T, D = x.shape
    d = D // heads
    s = scale if scale > 0 else 1.0 / math.sqrt(d)
    q, k, v = project_qkv(x, weights, heads, rope, rope_theta)
    logits = torch.einsum("bthc,bjhc->bhtj", q, k) * s                      # [B,H,T,T]
    if causal:
        logits = logits.masked_fill(~causal_visibility(T, x.device), float("-inf"))
    logits = logits - logits.amax(-1, keepdim=True)
    e = torch.exp(logits)
    p = e / e.sum(-1, keepdim=True)
    o = torch.einsum("bhtj,bjhc->bthc", p, v)                               # [B,T,H,d]
    return linear(merge_heads(o), weights, "out")


# ----------------------------------------------------------------------------------------------------------------
# ReLU attention (HyperMLP's R baseline)


def relu_mixer(x, weights, heads=4, rope=True, rope_theta=10000.0, causal=True, eps=1e-12):
    """ReLU attention, sigma(z) = ReLU(L2Norm_t(z)) on the raw scores (HyperMLP paper eq. 12 and App. L).

        z_t  = (q_t . k_j)_{j visible}                       [t] (causal: j <= t) or [T]: no score scale
        a_t  = ReLU(z_t / sqrt(||z_t||^2 + eps))             L2Norm over the whole visible row, affine-free
        o_t  = sum_j a_tj v_j
        y    = W_out merge_heads(o) + b_out

    eps sits under the square root, as in the paper's L2Norm_t(x) = x / sqrt(||x||^2 + eps); the HyperMLP
    authors' code divides by max(||z||, 1e-12) instead (specs/hypermlp_energy_ela.md); seqmix follows the paper.
    """
    B, T, D = x.shape
    q, k, v = project_qkv(x, weights, heads, rope, rope_theta)
    z = torch.einsum("bthc,bjhc->bhtj", q, k)                              # [B,H,T,T]
    if causal:
        z = z * causal_visibility(T, x.device).to(z.dtype)                 # invisible keys are not in the row
    norm = torch.sqrt((z * z).sum(-1, keepdim=True) + eps)
    a = torch.clamp(z / norm, min=0.0)
    o = torch.einsum("bhtj,bjhc->bthc", a, v)
    return linear(merge_heads(o), weights, "out")


# ----------------------------------------------------------------------------------------------------------------
# Normalised linear attention


def linear_mixer(x, weights, heads=4, feature="relu", eps=1e-6, rope=False, rope_theta=10000.0, causal=True):
    """Normalised linear attention (Katharopoulos et al., eq. 4-6), seqmix's `linear` mixer.

        q, k, v   = split_heads(W_qkv x + b_qkv); RoPE on q and k (before the feature map) when `rope`
        w_tj      = phi(q_t) . phi(k_j)                    phi: ReLU(.) + eps or ELU(.) + 1
        o_t       = sum_{j visible} w_tj v_j / max(sum_{j visible} w_tj, eps)
        y         = W_out merge_heads(o) + b_out

    j visible: j <= t (causal) or all j. `eps` is both the feature offset and the normaliser floor (the registry:
    "feature offset and normaliser floor"). No score scale.
    """
    B, T, D = x.shape
    q, k, v = project_qkv(x, weights, heads, rope, rope_theta)
    fq, fk = feature_map(q, feature, eps), feature_map(k, feature, eps)
    w = torch.einsum("bthc,bjhc->bhtj", fq, fk)                            # [B,H,T,T]
    if causal:
        w = w * causal_visibility(T, x.device).to(w.dtype)
    numerator = torch.einsum("bhtj,bjhc->bthc", w, v)                       # [B,T,H,d]
    normaliser = w.sum(-1).permute(0, 2, 1)                                  # [B,T,H]
    o = numerator / torch.clamp(normaliser, min=eps)[..., None]
    return linear(merge_heads(o), weights, "out")


# ----------------------------------------------------------------------------------------------------------------
# Gated linear attention


def gla_mixer(x, weights, heads=4, feature="relu", normalize=True, gate_normalizer=16.0, per_key=False, eps=1e-6,
              rope=False, rope_theta=10000.0):
    """Gated linear attention (Yang et al., GLA: S_t = G_t * S_{t-1} + k_t^T v_t, o_t = q_t S_t, with the gate
    alpha_t = sigmoid(x_t W + b)^(1/tau), tau = 16), seqmix's `gla` mixer, always causal. Run as its recurrence.

        q, k, v  = split_heads(W_qkv x + b_qkv); RoPE on q and k when `rope`; q~ = phi(q), k~ = phi(k)
        a_t      = logsigmoid(W_decay x_t + b_decay) / gate_normalizer
                   [B,T,H] one log decay per head, or (per_key) [B,T,H,d]: head h's key feature f is entry h*d+f
        S_t      = diag(e^{a_t}) S_{t-1} + k~_t (x) v_t            [d, d] per head, S_0 = 0
        z_t      = e^{a_t} * z_{t-1} + k~_t                        [d] per head, the normaliser state
        o_t      = q~_t S_t / max(q~_t . z_t, eps)                 (normalize=1: a decayed average)
                 = (q~_t / sqrt(d)) S_t                            (normalize=0, as the registry and gla header say)
        y        = W_out merge_heads(o) + b_out

    `eps` is the feature offset of ReLU + eps and the normaliser floor.
    """
    B, T, D = x.shape
    d = D // heads
    q, k, v = project_qkv(x, weights, heads, rope, rope_theta)
    fq, fk = feature_map(q, feature, eps), feature_map(k, feature, eps)
    if not normalize:
        fq = fq / math.sqrt(d)
    log_decay = torch.nn.functional.logsigmoid(linear(x, weights, "decay")) / gate_normalizer
    if per_key:
        log_decay = log_decay.reshape(B, T, heads, d)                       # [B,T,H,d]: decays rows of S
    else:
        log_decay = log_decay.reshape(B, T, heads, 1)                       # [B,T,H,1]: the whole state
    S = x.new_zeros(B, heads, d, d)                                         # [B,H,d_key,d_value]
    z = x.new_zeros(B, heads, d)
    outputs = []
    for t in range(T):
        decay = torch.exp(log_decay[:, t])                                  # [B,H,d] or [B,H,1]
        S = decay[..., None] * S + fk[:, t, :, :, None] * v[:, t, :, None, :]
        z = decay * z + fk[:, t]
        numerator = torch.einsum("bhf,bhfc->bhc", fq[:, t], S)
        if normalize:
            normaliser = (fq[:, t] * z).sum(-1)                             # [B,H]
            outputs.append(numerator / torch.clamp(normaliser, min=eps)[..., None])
        else:
            outputs.append(numerator)
    o = torch.stack(outputs, 1)                                             # [B,T,H,d]
    return linear(merge_heads(o), weights, "out")


# ----------------------------------------------------------------------------------------------------------------
# The delta rule (DeltaNet)


def delta_mixer(x, weights, heads=4, rope=False, rope_theta=10000.0):
    """The delta rule (Schlag et al.; DeltaNet, Yang et al. 2024), seqmix's `delta` mixer, always causal.

        q, k, v  = split_heads(W_qkv x + b_qkv); RoPE on q and k when `rope`
        q^       = q / (||q|| sqrt(d)),   k^ = k / ||k||                L2 per head (DeltaNet's qk L2 norm), q
                                                                         scaled by 1/sqrt(d) as DeltaNet does
        b_t      = sigmoid(W_write x_t + b_write)                       [B,T,H] write strength in (0, 1)
        S_t      = (I - b_t k^_t k^_t^T) S_{t-1} + b_t k^_t v_t^T       [d, d] per head, S_0 = 0
                 = S_{t-1} + b_t k^_t (v_t - S_{t-1}^T k^_t)^T           (the error-correcting write)
        o_t      = S_t^T q^_t                                           no normalisation (the numerator)
        y        = W_out merge_heads(o) + b_out

    The norms are floored at 1e-6 (reached by an all-zero projection only, never in the tests).
    """
    B, T, D = x.shape
    d = D // heads
    q, k, v = project_qkv(x, weights, heads, rope, rope_theta)
    q = q / (torch.clamp(torch.linalg.vector_norm(q, dim=-1, keepdim=True), min=1e-6) * math.sqrt(d))
    k = k / torch.clamp(torch.linalg.vector_norm(k, dim=-1, keepdim=True), min=1e-6)
    b = torch.sigmoid(linear(x, weights, "write"))                         # [B,T,H]
    S = x.new_zeros(B, heads, d, d)                                         # [B,H,d_key,d_value]
    outputs = []
    for t in range(T):
        kt, vt, bt = k[:, t], v[:, t], b[:, t]                              # [B,H,d], [B,H,d], [B,H]
        predicted = torch.einsum("bhfc,bhf->bhc", S, kt)                    # S_{t-1}^T k_t
        S = S + bt[..., None, None] * kt[..., :, None] * (vt - predicted)[..., None, :]
        outputs.append(torch.einsum("bhfc,bhf->bhc", S, q[:, t]))
    o = torch.stack(outputs, 1)
    return linear(merge_heads(o), weights, "out")


# ----------------------------------------------------------------------------------------------------------------
# Selective SSM (Mamba-style)


def ssm_mixer(x, weights, state=16, conv=4, dt_rank=0):
    """The diagonal selective SSM (Mamba, Gu & Dao, Alg. 2 with the discretisation of its code: A_bar = exp(delta A),
    B_bar = delta B), seqmix's `ssm` mixer, always causal. E = inner channels (in_proj's rows / 2), N = `state`.

        [u | z]  = W_in x                                   [B,T,E] each, no bias
        u        = SiLU(causal_conv(u))                     depthwise, kernel K = `conv` (skipped when 0), no bias:
                                                            conv(u)_t[c] = sum_{j=0..K-1} w[c, K-1-j] u_{t-j}[c]
        [r | b~ | c~] = W_x u                               widths dt_rank, N, N (Mamba's order dt, B, C), no bias
        delta    = softplus(W_dt r + b_dt)                  [B,T,E]
        b, c     = softplus(b~), softplus(c~)               [B,T,N], shared by all channels
        A        = -exp(A_log)                              [E,N]
        h_t      = exp(delta_t A) * h_{t-1} + delta_t b_t u_t      [E,N] per batch, h_0 = 0
        y_t      = sum_n c_t[n] h_t[:, n] + D_skip * u_t
        out      = W_out(y * SiLU(z))                       no bias

    Where seqmix departs from Mamba (documented in the ssm header and the registry, "with a positive impulse
    response"): b and c are softplus outputs (Mamba's are linear), so every impulse response
    delta_i sum_n c_t[n] b_i[n] exp(A sum delta) is positive and the scan is a prior FEM can read through
    (src/ops/ssm/README.md). The short conv has no bias (Mamba's Conv1d has one): the layer has no such parameter.
    dt_rank = 0 means ceil(D / 16), as in Mamba.
    """
    B, T, D = x.shape
    E = weights["in_proj.weight"].shape[0] // 2
    rank = dt_rank if dt_rank > 0 else math.ceil(D / 16)
    uz = linear(x, weights, "in_proj")
    u, z = uz[..., :E], uz[..., E:]
    if conv > 0:
        w = weights["conv.weight"]                                          # [E,K]
        K = w.shape[1]
        assert K == conv
        shifted = []
        for j in range(K):                                                  # u_{t-j}, zero before the start
            lag = torch.zeros_like(u)
            lag[:, j:] = u[:, :T - j]
            shifted.append(lag * w[:, K - 1 - j])
        u = sum(shifted)
    u = u * torch.sigmoid(u)                                                # SiLU
    proj = linear(u, weights, "x_proj")
    r, b, c = proj[..., :rank], proj[..., rank:rank + state], proj[..., rank + state:rank + 2 * state]
    delta = torch.nn.functional.softplus(linear(r, weights, "dt_proj"))     # [B,T,E]
    b, c = torch.nn.functional.softplus(b), torch.nn.functional.softplus(c) # [B,T,N]
    A = -torch.exp(weights["A_log"])                                        # [E,N]
    h = x.new_zeros(B, E, state)
    ys = []
    for t in range(T):
        dt = delta[:, t, :, None]                                           # [B,E,1]
        h = torch.exp(dt * A) * h + dt * b[:, t, None, :] * u[:, t, :, None]
        ys.append((h * c[:, t, None, :]).sum(-1))                          # [B,E]
    y = torch.stack(ys, 1) + weights["D_skip"] * u
    gated = y * (z * torch.sigmoid(z))
    return linear(gated, weights, "out_proj")


MIXERS = {
    "softmax": softmax_mixer,
    "relu": relu_mixer,
    "linear": linear_mixer,
    "gla": gla_mixer,
    "delta": delta_mixer,
    "ssm": ssm_mixer,
}
