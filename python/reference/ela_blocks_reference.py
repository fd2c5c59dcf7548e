"""Plain-PyTorch reference for Exact Linear Attention, the channel mixers (SwiGLU, GELU MLP, label-biased MoE),
the residual schemes (pre-norm, Hyper-Link with the Memory Lobe, MomenMHA, NagMHA) and the GPT-style `lm`
block stack. Written from the papers and specs, independently of seqmix's kernels; it imports torch only.

Sources: ELA paper (`papers/ela_paper.txt`; its equations were lost in extraction and are reconstructed in
`specs/hypermlp_energy_ela.md` §3), the energy-attention paper §3.1 (`papers/energy_attention_paper.txt`,
spec §2.1-2.2), seqmix's docs/ela.md and docs/energy.md, and the settled decisions of `specs/README.md`.

Every function takes its weights from a mapping `w` keyed by seqmix's parameter names (the C++ state_dict),
under a `prefix` ("" for a bare layer, "blocks.0.mixer." inside a model), so a caller can check that every
weight was read. Linear layers follow torch's convention: `W [out, in]`, y = x W^T + b.

Shapes: B batch, T length, D width, H heads, d = D / H head width, E experts, V vocabulary.
"""
import math
from typing import Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

# Norm epsilon: seqmix's RMSNorm and LayerNorm default (include/seqmix/modules/norm.h: eps = 1e-5).
NORM_EPS = 1e-5
# The top-k renormalisation's denominator guard: the ELA authors' MoE divides by (sum of the top-k probabilities
# + 1e-8) (specs/hypermlp_energy_ela.md §3.8, "renormalized to sum to 1 (with +1e-8)"); seqmix keeps it (docs/ela.md
# says only "renormalised to sum to 1").
ROUTER_RENORM_EPS = 1e-8
# direction_magnitude's norm |x| = sqrt(|x|^2 + 1e-12) (docs/ela.md, "The custom kernel").
NORM_FLOOR = 1e-12


def linear(x: Tensor, w: Mapping[str, Tensor], name: str, bias: bool) -> Tensor:
    """x [..., in] -> [..., out] with W = w[name + ".weight"] [out, in] (and b = w[name + ".bias"] [out])."""
    y = x @ w[name + ".weight"].transpose(0, 1)
    return y + w[name + ".bias"] if bias else y


# ---------------------------------------------------------------------------------------------------------------
# Norms
# ---------------------------------------------------------------------------------------------------------------
def rms_norm(x: Tensor, weight: Tensor, eps: float = NORM_EPS) -> Tensor:
    """RMSNorm: x / sqrt(mean_i x_i^2 + eps) * g.   x [..., D], g [D]."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = NORM_EPS) -> Tensor:
    """LayerNorm: (x - mean) / sqrt(var + eps) * g + b, var the biased (population) variance."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * weight + bias


def norm(x: Tensor, w: Mapping[str, Tensor], name: str, kind: str) -> Tensor:
    if kind == "rms":
        return rms_norm(x, w[name + ".weight"])
    if kind == "layer":
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"])
    raise ValueError(f"unknown norm {kind}")


# ---------------------------------------------------------------------------------------------------------------
# Rotary position embedding
# ---------------------------------------------------------------------------------------------------------------
def rotary(x: Tensor, theta: float = 10000.0) -> Tensor:
    """RoPE as a true rotation with half-split pairs (specs/README.md decision 4):

        for i < d/2, angle a_{t,i} = t * theta^(-2i/d) at position t (0-based),
        [x_i, x_{i+d/2}] -> [x_i cos a - x_{i+d/2} sin a,  x_i sin a + x_{i+d/2} cos a].

    x [B,T,H,d] (d even) -> [B,T,H,d]. (The ELA authors use the complex-pair convention on adjacent
    channels; seqmix's documented choice is the half split, which this follows.)"""
    B, T, H, d = x.shape
    half = d // 2
    i = torch.arange(half, dtype=x.dtype)
    inv_freq = theta ** (-2.0 * i / d)                                  # [d/2]
    angle = torch.arange(T, dtype=x.dtype)[:, None] * inv_freq[None]    # [T, d/2]
    cos = torch.cos(angle)[None, :, None, :]                           # [1,T,1,d/2]
    sin = torch.sin(angle)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ---------------------------------------------------------------------------------------------------------------
# Exact Linear Attention
# ---------------------------------------------------------------------------------------------------------------
def ela_kernel_matrix(q: Tensor, k: Tensor, kernel: str) -> Tensor:
    """The kernel's closed form k(q_t, k_s) for every pair (ELA paper eqs 3-5, docs/ela.md "Kernels").

    q [B,H,T,d], k [B,H,S,d] -> K [B,H,T,S]:
      hadamard_exp        sum_c exp(q_c) exp(k_c) = sum_c exp(q_c + k_c)          (eq 5)
      sum_sq_euclidean    ||q + k||^2                                            (eq 3)
      sub_sq_euclidean    ||q - k||^2                                            (eq 4)
      direction_magnitude 1 + |q||k| + q.k, |x| = sqrt(||x||^2 + 1e-12)          (seqmix's form of eq 13,
                                                     decision 8: non-negative, >= 1 by Cauchy-Schwarz)
    Written pair by pair, not through the feature maps phi, psi, so that it checks their decomposition."""
    if kernel == "hadamard_exp":
        return torch.exp(q[:, :, :, None, :] + k[:, :, None, :, :]).sum(-1)
    if kernel == "sum_sq_euclidean":
        return ((q[:, :, :, None, :] + k[:, :, None, :, :]) ** 2).sum(-1)
    if kernel == "sub_sq_euclidean":
        return ((q[:, :, :, None, :] - k[:, :, None, :, :]) ** 2).sum(-1)
    if kernel == "direction_magnitude":
        nq = torch.sqrt((q * q).sum(-1) + NORM_FLOOR)                    # [B,H,T]
        nk = torch.sqrt((k * k).sum(-1) + NORM_FLOOR)                    # [B,H,S]
        return 1.0 + nq[..., :, None] * nk[..., None, :] + q @ k.transpose(-1, -2)
    raise ValueError(f"unknown ELA kernel {kernel}")


def ela_attention(q: Tensor, k: Tensor, v: Tensor, kernel: str, causal: bool, eps: float = 1e-8) -> Tensor:
    """Row-normalised kernel attention in its explicit quadratic form (ELA paper eqs 8-12):

        y_t = sum_{s in A(t)} k(q_t, k_s) v_s / max(sum_{s in A(t)} k(q_t, k_s), eps)

    with A(t) = {s <= t} (causal, eqs 11-12) or all positions (bidirectional, eqs 9-10). The linear form
    phi(q_t) S_t / phi(q_t).z_t is the same number by associativity (eq 7); this reference keeps the T x T
    matrix so that it is an independent derivation. eps is the row-sum floor (the authors' clamp at 1e-8).

    q, k [B,T,H,d], v [B,T,H,dv] -> [B,T,H,dv]."""
    qh, kh, vh = (t.permute(0, 2, 1, 3) for t in (q, k, v))             # [B,H,T,*]
    K = ela_kernel_matrix(qh, kh, kernel)                              # [B,H,T,T]
    if causal:
        T = q.shape[1]
        K = K * torch.tril(torch.ones(T, T, dtype=K.dtype))
    row = K.sum(-1, keepdim=True).clamp_min(eps)                       # [B,H,T,1]
    y = (K @ vh) / row                                                 # [B,H,T,dv]
    return y.permute(0, 2, 1, 3)


def ela_mixer(x: Tensor, w: Mapping[str, Tensor], prefix: str = "", *, heads: int = 4,
              kernel: str = "hadamard_exp", causal: bool = True, rope: bool = True, rope_theta: float = 10000.0,
              scale: float = 1.0, bias: bool = False, out: bool = True, eps: float = 1e-8) -> Tensor:
    """The ELA attention block (docs/ela.md "The mixer", spec §3.5, the authors' FGPT.py):

        [q | k | v] = x W_qkv^T (+ b),   W_qkv [3D, D]: rows 0..D-1 give q, D..2D-1 k, 2D..3D-1 v
        q, k, v split into H heads of width d = D/H (head h = channels h*d .. h*d + d-1)
        q, k <- scale * RoPE(q), scale * RoPE(k)   (RoPE per head when rope=1)
        y = ELA(q, k, v) per head, heads concatenated, then W_out (+ b) when out=1.

    x [B,T,D] -> [B,T,D]. `scale` multiplies q and k before the kernel (the authors apply none)."""
    B, T, D = x.shape
    d = D // heads
    qkv = linear(x, w, prefix + "qkv", bias)                           # [B,T,3D]
    q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]
    q, k, v = (t.reshape(B, T, heads, d) for t in (q, k, v))           # [B,T,H,d]
    if rope:
        q, k = rotary(q, rope_theta), rotary(k, rope_theta)
    q, k = q * scale, k * scale
    y = ela_attention(q, k, v, kernel, causal, eps).reshape(B, T, D)
    return linear(y, w, prefix + "out", bias) if out else y


# ---------------------------------------------------------------------------------------------------------------
# Channel mixers
# ---------------------------------------------------------------------------------------------------------------
def swiglu(x: Tensor, w: Mapping[str, Tensor], prefix: str = "") -> Tensor:
    """SwiGLU (Shazeer 2020): W3 (SiLU(W1 x) * W2 x), no biases; SiLU(u) = u * sigmoid(u).
    W1, W2 [hidden, D] (gate, value), W3 [D, hidden]. x [..., D] -> [..., D]."""
    gate = linear(x, w, prefix + "w1", False)
    value = linear(x, w, prefix + "w2", False)
    return linear(gate * torch.sigmoid(gate) * value, w, prefix + "w3", False)


def gelu_exact(u: Tensor) -> Tensor:
    """GELU(u) = u Phi(u) = u/2 (1 + erf(u / sqrt 2)) (the exact form, not the tanh approximation)."""
    return 0.5 * u * (1.0 + torch.erf(u / math.sqrt(2.0)))


def mlp(x: Tensor, w: Mapping[str, Tensor], prefix: str = "", bias: bool = True) -> Tensor:
    """The GPT MLP: fc2(GELU(fc1 x)). fc1 [hidden, D], fc2 [D, hidden]. x [..., D] -> [..., D]."""
    return linear(gelu_exact(linear(x, w, prefix + "fc1", bias)), w, prefix + "fc2", bias)


def moe(x: Tensor, w: Mapping[str, Tensor], prefix: str = "", *, experts: int = 4, top_k: int = 2,
        label: str = "outer", label_source: str = "router", aux: float = 0.01,
        skip: bool = False) -> Tuple[Tensor, Tensor]:
    """Mixture of SwiGLU experts with top-k routing and the ELA paper's label-vector bias (eqs 14/15).

    For each token x [D] (the tokens of every batch row and position pooled, N = B*T):
        p = softmax(x W_r^T + b_r)                      router probabilities [E]
        TopK = the top_k experts by p
        s_e = p_e / (sum_{e' in TopK} p_e' + 1e-8)  (top_k > 1, the authors' guard);  s_e = p_e (top_k = 1, Switch: the raw probability)
        E_e(x) = SwiGLU_e(x)  (experts.e.w1/w2/w3)
        outer (eq 14): y = sum_{e in TopK} [ s_e E_e(x) + l_e ]         dy/dl_e = I
        inner (eq 15): y = sum_{e in TopK} s_e (E_e(x) + l_e)           dy/dl_e = s_e I
        none:          y = sum_{e in TopK} s_e E_e(x)
        skip:          y <- x + y
    l_e is row e of the router weight W_r (label_source=router: the same vector keys the routing and biases
    the output, spec §3.8) or row e of its own parameter `label` [E,D] (label_source=separate).

    Load balance (Switch Transformer, not the authors' buggy top-2 broadcast; docs/ela.md):
        f_e = (number of the N*top_k assignments that went to e) / (N*top_k)      (no gradient)
        P_e = mean over the N tokens of p_e
        aux_loss = aux * E * sum_e f_e P_e     (= aux at a uniform load)

    x [..., D] -> (y [..., D], aux_loss []). Every expert is evaluated on every token and the unselected ones
    weighted by 0 (a dense restatement, not a dispatch)."""
    shape = x.shape
    tokens = x.reshape(-1, shape[-1])                                  # [N,D]
    N = tokens.shape[0]
    probs = torch.softmax(linear(tokens, w, prefix + "router", True), dim=-1)   # [N,E]
    top_p, top_i = torch.topk(probs, top_k, dim=-1)                    # [N,k]
    selected = torch.zeros(N, experts, dtype=x.dtype).scatter(1, top_i, 1.0)    # [N,E] 0/1 mask
    if top_k > 1:
        scores = probs * selected / ((probs * selected).sum(-1, keepdim=True) + ROUTER_RENORM_EPS)  # s_e on TopK
    else:
        scores = probs * selected
    outputs = torch.stack([swiglu(tokens, w, f"{prefix}experts.{e}.") for e in range(experts)], dim=1)  # [N,E,D]
    labels = w[prefix + "router.weight"] if label_source == "router" else w[prefix + "label"]          # [E,D]
    y = (scores[..., None] * outputs).sum(1)                           # [N,D]
    if label == "outer":
        y = y + selected @ labels
    elif label == "inner":
        y = y + scores @ labels
    elif label != "none":
        raise ValueError(f"unknown label mode {label}")
    if skip:
        y = y + tokens
    f = selected.sum(0) / (N * top_k)                                  # [E], a count: no gradient
    P = probs.mean(0)                                                  # [E]
    aux_loss = aux * experts * (f * P).sum()
    return y.reshape(shape), aux_loss


def channel_mixer(x: Tensor, w: Mapping[str, Tensor], prefix: str, spec: Optional[dict]) -> Tuple[Tensor, Optional[Tensor]]:
    """Dispatch on spec = {"name": "swiglu" | "mlp" | "moe", options...}: (y, aux_loss or None)."""
    options = dict(spec)
    name = options.pop("name")
    if name == "swiglu":
        return swiglu(x, w, prefix), None
    if name == "mlp":
        return mlp(x, w, prefix, **options), None
    if name == "moe":
        return moe(x, w, prefix, **options)
    raise ValueError(f"unknown channel mixer {name}")


# ---------------------------------------------------------------------------------------------------------------
# The language model and its residual schemes
# ---------------------------------------------------------------------------------------------------------------
def language_model(tokens: Tensor, w: Mapping[str, Tensor], *, layers: int, mixers: Sequence[dict],
                   channel: Optional[dict] = None, norm_kind: str = "rms", residual: Optional[dict] = None,
                   final_norm: bool = True, tie: bool = False, head_bias: bool = True,
                   pos: str = "none") -> Tuple[Tensor, Optional[Tensor]]:
    """The GPT-style `lm` stack (DESIGN.md "Model"): tokens [B,T] -> (logits [B,T,V], summed aux loss or None).

        x = E[tokens] (+ P[0..T-1] with pos=learned)                       E [V,D], P [max_len,D]
        blocks l = 0..L-1, mixer spec mixers[l mod len(mixers)], threaded by the residual scheme:
          prenorm:    x <- x + mixer(norm1(x));  x <- x + channel(norm2(x))
          hyperlink:  a = mixer(norm1(x));  F = a + channel(a)  (skip=1; channel(a) with skip=0);
                      x <- x + F + lobe(F)    (ELA paper §V-C pseudocode; no second norm, no attention residual)
          momentum:   per sublayer f in order mixer_1, channel_1, mixer_2, ...:
                      m <- beta_g m + f(z);  z <- z + eta_g m                         (energy paper eq 8)
          nesterov:   m <- beta_g m + f(z + beta_g m);  z <- z + eta_g m             (energy paper eq 9)
                      with m = 0 at the input, f = sublayer(norm(.)) (norm=pre) or f = sublayer(.) and
                      z <- norm(z) after the update with that sublayer's norm (norm=post);
                      g = the sublayer's index (share=sublayer), its block (layer) or 0 (global).
        h = final_norm(x) (when final_norm=1)
        logits = h E^T + head_bias (tie=1) or h W_head^T (+ b_head).

    Memory Lobe (hyperlink lobe != none): single-head ELA over the full width on F with its own W_qkv
    (blocks.l.lobe.qkv.weight), no RoPE, no norm, no output projection, kernel lobe_kernel; causal for
    lobe=causal or auto in a causal model, bidirectional for lobe=bidirectional (decision 7: the paper's
    bidirectional lobe sees the future in a causal LM; seqmix offers both, auto = causal in a decoder).

    mixers: ELA options per layer (keyword arguments of ela_mixer). channel: a channel_mixer spec or None.
    residual: {"name": "prenorm" | "hyperlink" | "momentum" | "nesterov", options...}."""
    residual = dict(residual or {"name": "prenorm"})
    scheme = residual.pop("name")
    B, T = tokens.shape
    x = w["token_embedding.weight"][tokens]                            # [B,T,D]
    if pos == "learned":
        x = x + w["position_embedding.weight"][:T][None]
    aux_total = None

    def add_aux(a):
        nonlocal aux_total
        if a is not None:
            aux_total = a if aux_total is None else aux_total + a

    def mix(l, h):
        return ela_mixer(h, w, f"blocks.{l}.mixer.", **mixers[l % len(mixers)])

    def chan(l, h):
        y, a = channel_mixer(h, w, f"blocks.{l}.channel.", channel)
        add_aux(a)
        return y

    if scheme == "prenorm":
        for l in range(layers):
            x = x + mix(l, norm(x, w, f"blocks.{l}.mixer_norm", norm_kind))
            if channel is not None:
                x = x + chan(l, norm(x, w, f"blocks.{l}.channel_norm", norm_kind))
    elif scheme == "hyperlink":
        skip = residual.get("skip", True)
        lobe = residual.get("lobe", "none")
        lobe_kernel = residual.get("lobe_kernel", "hadamard_exp")
        for l in range(layers):
            a = mix(l, norm(x, w, f"blocks.{l}.mixer_norm", norm_kind))
            if channel is None:
                F = a
            else:
                F = a + chan(l, a) if skip else chan(l, a)
            x = x + F
            if lobe != "none":
                mixer_causal = mixers[l % len(mixers)].get("causal", True)
                lobe_causal = mixer_causal if lobe == "auto" else lobe == "causal"
                x = x + ela_mixer(F, w, f"blocks.{l}.lobe.", heads=1, kernel=lobe_kernel, causal=lobe_causal,
                                  rope=False, out=False)
    elif scheme in ("momentum", "nesterov"):
        share = residual.get("share", "sublayer")
        post = residual.get("norm", "pre") == "post"
        beta, eta = w["residual.beta"], w["residual.eta"]
        z, m = x, torch.zeros_like(x)
        index = 0
        for l in range(layers):
            subs = [(f"blocks.{l}.mixer_norm", lambda h, l=l: mix(l, h))]
            if channel is not None:
                subs.append((f"blocks.{l}.channel_norm", lambda h, l=l: chan(l, h)))
            for norm_name, f in subs:
                g = {"sublayer": index, "layer": l, "global": 0}[share]
                index += 1
                point = z + beta[g] * m if scheme == "nesterov" else z    # the look-ahead (NAG)
                m = beta[g] * m + (f(point) if post else f(norm(point, w, norm_name, norm_kind)))
                z = z + eta[g] * m
                if post:
                    z = norm(z, w, norm_name, norm_kind)
        x = z
    else:
        raise ValueError(f"unknown residual scheme {scheme}")

    if final_norm:
        x = norm(x, w, "final_norm", norm_kind)
    if tie:
        logits = x @ w["token_embedding.weight"].transpose(0, 1)
        if head_bias:
            logits = logits + w["head_bias"]
    else:
        logits = linear(x, w, "output_head", head_bias)
    return logits, aux_total
