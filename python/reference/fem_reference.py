"""The Free Energy Mixer (`fem:`), written out in plain PyTorch from the paper and seqmix's documented choices.

An independent second derivation of src/layers/fem (FEM paper fem_paper.txt §2.3, App. F-K; docs/fem.md;
specs/README.md decisions 1-6): every prior is materialised as its explicit score matrix s_t(i) from the paper's
definitions (App. H, eqs. 26-32) and normalised by summation, never through a scan, so a formula the C++ gets
wrong in its scans, kernels or projections shows up as a difference. Only `torch` is imported.

Notation: B batch, T time, D model width, H heads, d value width (all heads), dv = d / H, dk the query/key head
width, Hc the conditioner width, N the SSM state size. Head h owns the contiguous channels [h dv, (h+1) dv).

The read (FEM paper eqs. 4, 7, 9-11, 26; docs/fem.md "The read"), per value channel j:

    p_t(i)   = s_t(i) / max(sum_{r} s_t(r), 1e-30)                 (eq. 26; the floor only meets an empty support)
    vc       = min(max(v, -cap/beta), cap/beta)                    (value cap, cap > 0; the mean reads it too)
    mu_t     = sum_i p_t(i) vc_i                                   (the expectation baseline)
    F_t      = (log max(sum_i p_t(i) exp(beta vc_i - m), tiny) + m) / beta     (eq. 4, shifted by m)
    y_t      = g_t * ((1 - lambda_t) mu_t + lambda_t F_t)          (eqs. 10-11)
    out_t    = W_o y_t + b_o

    beta     = softplus(beta_param + 1.8)                          (App. K; 1 without flag T)
    lambda_t = sigmoid((W_l x_t + b_l) * (1 + c^l_t))              (pre-activation modulated: docs/fem.md)
    g_t      = a_t / sqrt(mean_head(a_t^2) + eps),  a_t = softplus((W_g x_t + b_g) * (1 + c^g_t))
                                                                   (decision 5: softplus, RMS 1 per head)
    v_t      = (W_v x_t + b_v) * (1 + c^v_t)                       (eq. 34b)

The shift m (decision 1): the constant cap when cap > 0 (then e = exp(beta vc - cap) lies in [e^{-2 cap}, 1]),
and with cap = 0 the maximum of beta v over each query's own support (causal: keys i <= t; bidirectional: the
whole sequence). It cancels exactly; only the floor tiny (the smallest normal float64) can see it.

Flags (docs/fem.md): without L, y = mu of the plain (unclipped) values; L without T, y = F at beta = 1;
T needs L; without G, y is not gated; without C, every c is 0.

The conditioner (flag C, App. I, decision 3: the exact recurrence, not a floored envelope):

    xh = LN(x);  s = softplus(xh W_f + b_f);  u = xh W_x + b_x;  a = softplus(xh W_s + b_s)     [B,T,Hc]
    h~_t = sum_{i<=t} exp(-sum_{r=i+1..t} s_r) u_i                                              (eq. 33)
    c_t  = (SiLU(a_t / max(||a_t||, 1e-8)) * LN(h~_t)) W_c                                      [B,T,Dc]

c is sliced as [c^v (d) | prior modulation | c^l (d, flag T) | c^g (d, flag G)]; the prior's slice is added to its
parameters' pre-activations (eq. 34a): softmax, linear: [q (H dk) | k (H dk)]; gla: [q | k | decay (H)];
delta: [q | k | write (H)]; aft: keys (d); lrnn_decay: decay (H); ssm: step size (d). The conditioner is causal
in both modes (eq. 33 sums over i <= t).

Priors (App. H; docs/fem.md "Priors"), scores s_t(i) for i in the support (0 elsewhere):

    softmax     exp(q_t . k_i / sqrt(dk))                            RoPE on q, k          (eq. 27; §2.1 scale)
    linear      phi(q_t) . phi(k_i),  phi = ReLU + eps               RoPE before phi
    gla         exp(sum_{r=i+1..t} a_r) phi(q_t) . phi(k_i),  a = logsigmoid(w.x + b)/16 per head  (eq. 28)
    aft         exp(k_{i,j}) per channel (stabilised by the causal running max of k: decision 2)  (eq. 30)
    lrnn_decay  exp(sum_{r=i+1..t} a_r) per head                                              (eq. 31)
    ssm         delta_i[c] sum_n C_t[n] B_i[n] exp(A[c,n] sum_{r=i+1..t} delta_r[c]) + D[c] 1{i=t}   (eq. 32,
                with src/ops/ssm/README.md's discretisation; delta, B, C, D softplus, A = -softplus)
    delta       q_t^T prod_{j=t..i+1} (I - b_j k_j k_j^T) b_i k_i  (signed; q, k L2-normalised, q / sqrt(dk),
                b = sigmoid(w.x + c) per head: src/ops/delta/README.md)

RoPE (decision 4): a true rotation of the half-split pairs (x_f, x_{f+dk/2}) by angle t * theta^(-2f/dk).
Widths (§2.3.3, App. H.7): budget i: d = D/2, qk = 4d/2; budget ii: d = 2D/3, qk = 2d/2, each rounded to the
nearest multiple of 2H (ties down, at least 2H).
"""
import math

import torch
import torch.nn.functional as F

PRIORS = ("softmax", "linear", "gla", "aft", "lrnn_decay", "ssm", "delta", "ema")
QUERY_KEY_PRIORS = ("softmax", "linear", "gla", "delta")
BIDIRECTIONAL_PRIORS = ("softmax", "linear")
PRIOR_NORMALISER_FLOOR = 1e-30  # the normaliser floor (src/ops prior_read.h): only an empty support meets it
LAYER_NORM_EPS = 1e-5
TDC_GATE_NORM_FLOOR = 1e-8  # the conditioner's unit-l2 shortcut: a / max(||a||, 1e-8)
DELTA_NORM_FLOOR = 1e-6  # delta prior: q / max(||q||, 1e-6), likewise k


class Weights:
    """The layer's weights by their state_dict name; records which names were read."""

    def __init__(self, tensors):
        self.tensors = dict(tensors)
        self.used = set()

    def __getitem__(self, name):
        self.used.add(name)
        return self.tensors[name]

    def __contains__(self, name):
        return name in self.tensors


def round_to_multiple(x, unit):
    """Nearest multiple of unit to x, exact ties to the smaller, at least one unit."""
    q = x / unit
    lo, hi = math.floor(q), math.ceil(q)
    pick = lo if q - lo <= hi - q else hi
    return max(1, pick) * unit


def fem_widths(dim, heads, budget="i", value_dim=0, qk_dim=0):
    """(d, qk): the value width and the query/key width over all heads. Budget i: d = D/2, r = 4; ii: d = 2D/3,
    r = 2; the prior block D x (r d) is W_q and W_k, so qk = r d / 2 (FEM paper §2.3.3, App. H.7)."""
    if budget == "i":
        d, r = dim / 2, 4.0
    elif budget == "ii":
        d, r = 2 * dim / 3, 2.0
    else:
        raise ValueError(f"budget must be i or ii, not {budget!r}")
    d = value_dim if value_dim > 0 else round_to_multiple(d, 2 * heads)
    qk = qk_dim if qk_dim > 0 else round_to_multiple(0.5 * r * d, 2 * heads)
    return d, qk


def linear(x, w, name):
    """x [..., in] -> x W^T + b [..., out] for the Linear `name` (its bias if it has one)."""
    y = x @ w[name + ".weight"].transpose(0, 1)
    if name + ".bias" in w:
        y = y + w[name + ".bias"]
    return y


def layer_norm(x, weight, bias, eps=LAYER_NORM_EPS):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance)."""
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).square().mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def rope(x, theta):
    """x [B,T,H,dk] rotated at positions 0..T-1: pairs (f, f + dk/2), angle t * theta^(-2f/dk) (decision 4)."""
    T, dk = x.shape[1], x.shape[-1]
    half = dk // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / dk)          # [dk/2]
    angle = torch.arange(T, dtype=torch.float64)[:, None] * freq                      # [T, dk/2]
    cos, sin = angle.cos()[None, :, None, :].to(x.dtype), angle.sin()[None, :, None, :].to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], -1)


def gate_rms_normalise(a, eps):
    """The outer gate's normalisation (decision 5): a [..., dv] (one head's softplus outputs) to RMS 1 over the
    head, g = a / sqrt(mean(a^2) + eps), the eps a floor on the mean square (so a -> 0 gives g -> 0)."""
    return a / torch.sqrt(a.square().mean(-1, keepdim=True) + eps)


def split_heads(t, heads):
    """[B,T,H*w] -> [B,T,H,w]"""
    return t.reshape(t.shape[0], t.shape[1], heads, t.shape[-1] // heads)


def causal_support(T):
    """[T(t), T(i)] bool: i <= t."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def decay_kernel(log_decay):
    """log_decay a [B,T,...] (<= 0) -> exp(sum_{r=i+1..t} a_r) [B,T(t),T(i),...] for i <= t, 0 for i > t."""
    T = log_decay.shape[1]
    total = log_decay.cumsum(1)
    between = total.unsqueeze(2) - total.unsqueeze(1)                 # [B,t,i,...] = sum_{r=i+1..t} a_r
    support = causal_support(T).reshape((1, T, T) + (1,) * (log_decay.dim() - 2))
    return torch.where(support, between, torch.full_like(between, -math.inf)).exp()


def time_decay_conditioner(x, w):
    """App. I, decision 3: x [B,T,D] -> c [B,T,Dc] through the exact decayed sum (eq. 33)."""
    xh = layer_norm(x, w["conditioner.input_norm.weight"], w["conditioner.input_norm.bias"])
    s = F.softplus(linear(xh, w, "conditioner.decay"))                # [B,T,Hc] decay rates >= 0
    u = linear(xh, w, "conditioner.input")                            # [B,T,Hc]
    a = F.softplus(linear(xh, w, "conditioner.shortcut"))             # [B,T,Hc]
    kernel = decay_kernel(-s)                                         # [B,t,i,Hc]
    h = (kernel * u.unsqueeze(1)).sum(2)                              # [B,T,Hc]
    unit = a / a.norm(dim=-1, keepdim=True).clamp_min(TDC_GATE_NORM_FLOOR)
    hn = layer_norm(h, w["conditioner.hidden_norm.weight"], w["conditioner.hidden_norm.bias"])
    return (F.silu(unit) * hn) @ w["conditioner.output"]              # [B,T,Dc]


def prior_modulation_width(prior, heads, d, qk):
    return {"softmax": 2 * qk, "linear": 2 * qk, "gla": 2 * qk + heads, "delta": 2 * qk + heads,
            "aft": d, "lrnn_decay": heads, "ssm": d, "ema": heads}[prior]


def plus(pre, modulation):
    """theta + G(c) (eq. 34a), or theta without the conditioner."""
    return pre if modulation is None else pre + modulation


def slice_or_none(c, start, width):
    return None if c is None else c[..., start:start + width]


def query_key(x, w, c, heads, qk, rope_on, theta):
    """q, k [B,T,H,dk]: W_q x + b (+ c_q), W_k x + b (+ c_k), then RoPE (modulation before the rotation)."""
    q = split_heads(plus(linear(x, w, "prior.query"), slice_or_none(c, 0, qk)), heads)
    k = split_heads(plus(linear(x, w, "prior.key"), slice_or_none(c, qk, qk)), heads)
    if rope_on:
        q, k = rope(q, theta), rope(k, theta)
    return q, k


def log_decay_per_head(x, w, c, gate_normalizer):
    """a_t = logsigmoid(w . x_t + b (+ c)) / gate_normalizer [B,T,H] (<= 0)."""
    return F.logsigmoid(plus(linear(x, w, "prior.decay"), c)) / gate_normalizer


def prior_scores(prior, x, w, c, o):
    """Scores s_t(i) of the prior [B,T(t),S(i),H,1] (per head) or [B,T,S,H,dv] (per channel), 0 off the support
    (FEM paper App. H). c: the prior's slice of the conditioner output, or None."""
    H, d, qk, dv = o["heads"], o["d"], o["qk"], o["dv"]
    B, T, _ = x.shape
    dk = qk // H if qk else 0
    support = causal_support(T) if o["causal"] else torch.ones(T, T, dtype=torch.bool)
    support = support.reshape(1, T, T, 1, 1)
    if prior in ("softmax", "linear", "gla"):
        q, k = query_key(x, w, c, H, qk, o["rope"], o["rope_theta"])
    if prior == "softmax":                                            # eq. 27, scale 1/sqrt(dk)
        logits = torch.einsum("bthf,bshf->btsh", q, k).unsqueeze(-1) / math.sqrt(dk)
        logits = logits.masked_fill(~support, -math.inf)
        top = logits.amax(2, keepdim=True).detach()                   # the shift cancels in p = s / sum s
        return (logits - top).exp()
    if prior in ("linear", "gla"):                                    # App. H.2: ReLU(RoPE(.)) + eps
        phi_q, phi_k = F.relu(q) + o["eps"], F.relu(k) + o["eps"]
        s = torch.einsum("bthf,bshf->btsh", phi_q, phi_k).unsqueeze(-1)
        if prior == "gla":                                            # eq. 28: per-head decay envelope
            a = log_decay_per_head(x, w, slice_or_none(c, 2 * qk, H), o["gate_normalizer"])
            s = s * decay_kernel(a).unsqueeze(-1)
        return s * support
    if prior == "lrnn_decay":                                         # eq. 31
        a = log_decay_per_head(x, w, c, o["gate_normalizer"])
        return decay_kernel(a).unsqueeze(-1)
    if prior == "ema":                                                # gamma_h^(t-i): a learned per-head decay
        a = -F.softplus(plus(w["prior.decay_logit"].expand(B, T, H), c))   # [B,T,H] log gamma_h (+ c)
        return decay_kernel(a).unsqueeze(-1)
    if prior == "aft":                                                # eq. 30, per channel
        keys = split_heads(plus(linear(x, w, "prior.keys"), c), H)    # [B,T,H,dv]
        top = keys.cummax(1).values.detach()                          # decision 2: causal running max of k
        return (keys.unsqueeze(1) - top.unsqueeze(2)).exp() * support  # [B,t,i,H,dv]: exp(k_i - max_{r<=t} k_r)
    if prior == "ssm":                                                # eq. 32, per channel
        delta = F.softplus(plus(linear(x, w, "prior.delta"), c))      # [B,T,d] step sizes
        b_in = F.softplus(linear(x, w, "prior.input_b"))              # [B,T,N]
        c_out = F.softplus(linear(x, w, "prior.output_c"))            # [B,T,N]
        A = -F.softplus(w["prior.A_param"])                           # [d,N] < 0
        D = F.softplus(w["prior.D_param"])                            # [d]
        elapsed = delta.cumsum(1)
        between = elapsed.unsqueeze(2) - elapsed.unsqueeze(1)         # [B,t,i,d] = sum_{r=i+1..t} delta_r
        mask = causal_support(T).reshape(1, T, T, 1, 1)
        decay = torch.where(mask, between.unsqueeze(-1) * A, torch.full((), -math.inf, dtype=x.dtype)).exp()
        coupling = c_out.unsqueeze(2) * b_in.unsqueeze(1)             # [B,t,i,N] = C_t[n] B_i[n]
        s = delta.unsqueeze(1) * (decay * coupling.unsqueeze(3)).sum(-1)   # [B,t,i,d]
        s = s + torch.eye(T, dtype=x.dtype).reshape(1, T, T, 1) * D   # the skip D at i = t
        return s.reshape(B, T, T, H, dv)
    if prior == "delta":                                              # the delta rule's implied weights (signed)
        q, k = query_key(x, w, c, H, qk, o["rope"], o["rope_theta"])
        q = q / (q.norm(dim=-1, keepdim=True).clamp_min(DELTA_NORM_FLOOR) * math.sqrt(dk))
        k = k / k.norm(dim=-1, keepdim=True).clamp_min(DELTA_NORM_FLOOR)
        b = torch.sigmoid(plus(linear(x, w, "prior.write"), slice_or_none(c, 2 * qk, H)))  # [B,T,H]
        # column i of `written` holds prod_{j=i+1..t} (I - b_j k_j k_j^T) b_i k_i once step t is reached
        written = x.new_zeros(B, H, dk, T)
        rows = []
        for t in range(T):
            kt, bt = k[:, t], b[:, t]                                 # [B,H,dk], [B,H]
            along_k = torch.einsum("bhf,bhfi->bhi", kt, written).unsqueeze(2)           # k_t^T column_i
            erased = written - bt[..., None, None] * kt.unsqueeze(-1) * along_k         # (I - b_t k_t k_t^T) column_i
            column = (bt.unsqueeze(-1) * kt).unsqueeze(-1)            # [B,H,dk,1]
            written = torch.cat([erased[..., :t], column, erased[..., t + 1:]], -1)
            rows.append(torch.einsum("bhf,bhfi->bih", q[:, t], written))   # [B,S,H]
        return torch.stack(rows, 1).unsqueeze(-1)                     # [B,t,i,H,1]
    raise ValueError(f"unknown prior {prior!r}")


def read(p, values):
    """sum_i p_t(i) values_i: p [B,T,S,H,1|dv], values [B,S,H,dv] -> [B,T,H,dv]."""
    return (p * values.unsqueeze(1)).sum(2)


def sdpa_read(x, w, c, o, values):
    """The softmax prior's read of values [B,S,H,W] without its T x S matrix: one call of PyTorch's
    scaled_dot_product_attention (scale 1/sqrt(dk), causal or not), as the FEM authors' layer reads its prior."""
    q, k = query_key(x, w, c, o["heads"], o["qk"], o["rope"], o["rope_theta"])
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), values.transpose(1, 2),
                                         is_causal=o["causal"])
    return out.transpose(1, 2)


def fem_reference(x, weights, prior="softmax", flags="CLTG", heads=4, budget="i", value_dim=0, qk_dim=0,
                  rope=-1, rope_theta=10000.0, beta_offset=1.8, cap=40.0, tdc_hidden=0, ssm_state=16,
                  gate_normalizer=16.0, eps=1e-6, causal=True, read_with_sdpa=False):
    """x [B,T,D] -> [B,T,D]: `fem:prior=...,flags=...` on the weights (a Weights, or a dict by state_dict name).

    read_with_sdpa (softmax prior, cap > 0): the same layer reading [clip(v), exp(u - cap)] with one
    scaled_dot_product_attention call instead of the explicit score matrix: the plain-PyTorch FEM-SM layer the GPU
    benchmark times against (bench/gpu_bench.py); equal to the explicit read in float64 (test_reference_fem)."""
    w = weights if isinstance(weights, Weights) else Weights(weights)
    if set(flags) - set("CLTG"):
        raise ValueError(f"unknown flags in {flags!r}")
    C, L, Tf, G = ("C" in flags), ("L" in flags), ("T" in flags), ("G" in flags)
    if Tf and not L:
        raise ValueError("flag T needs L")
    if read_with_sdpa and (prior != "softmax" or (L and cap <= 0)):
        raise ValueError("read_with_sdpa reads the softmax prior with the constant shift: prior=softmax, cap > 0")
    if not causal and prior not in BIDIRECTIONAL_PRIORS:
        raise ValueError(f"prior {prior} is causal only")
    B, T, D = x.shape
    d, qk = fem_widths(D, heads, budget, value_dim, qk_dim)
    if prior not in QUERY_KEY_PRIORS:
        qk = 0
    dv = d // heads
    rope_on = (prior in QUERY_KEY_PRIORS) if rope < 0 else bool(rope)
    o = dict(heads=heads, d=d, qk=qk, dv=dv, rope=rope_on, rope_theta=rope_theta, causal=causal, eps=eps,
             gate_normalizer=gate_normalizer)
    # The conditioner's slices: [v | prior | lambda | g] (docs/fem.md, App. I.2)
    c_v = c_prior = c_lambda = c_gate = None
    if C:
        hidden = tdc_hidden if tdc_hidden > 0 else max(1, d // 16)  # H_c = d/16 (§2.3.3)
        widths = [d, prior_modulation_width(prior, heads, d, qk), d if Tf else 0, d if G else 0]
        assert tuple(w.tensors["conditioner.output"].shape) == (hidden, sum(widths)), "conditioner widths"
        c = time_decay_conditioner(x, w)
        starts = [sum(widths[:n]) for n in range(4)]
        c_v, c_prior = c[..., :d], c[..., starts[1]:starts[2]]
        c_lambda = c[..., starts[2]:starts[3]] if Tf else None
        c_gate = c[..., starts[3]:] if G else None

    def modulated(pre, m):  # (1 + eta) on the pre-activation (eq. 34b; lambda and g: docs/fem.md's departure)
        return pre if m is None else pre * (1 + m)

    v = split_heads(modulated(linear(x, w, "value"), c_v), heads)            # [B,T,H,dv]
    if read_with_sdpa:
        p = None
        read_values = lambda values: sdpa_read(x, w, c_prior, o, values)     # noqa: E731
    else:
        s = prior_scores(prior, x, w, c_prior, o)                              # [B,t,i,H,1|dv]
        p = s / s.sum(2, keepdim=True).clamp_min(PRIOR_NORMALISER_FLOOR)      # eq. 26
        read_values = lambda values: read(p, values)                          # noqa: E731

    if not L:
        y = read_values(v)                                                     # mu, the prior's plain read
    else:
        beta = F.softplus(w["beta_param"] + beta_offset) if Tf else torch.ones(d, dtype=x.dtype)
        beta = beta.reshape(heads, dv)
        if cap > 0:                                                            # |beta v| <= cap, min/max
            limit = cap / beta
            vc = torch.minimum(torch.maximum(v, -limit), limit)
        else:
            vc = v
        u = beta * vc                                                          # [B,S,H,dv]
        if cap > 0:
            shift = torch.full((), float(cap), dtype=x.dtype)                 # decision 1: constant shift
        else:                                                                  # each query's own support
            support = causal_support(T) if causal else torch.ones(T, T, dtype=torch.bool)
            u_t = u.unsqueeze(1).expand(B, T, T, heads, dv)
            shift = u_t.masked_fill(~support.reshape(1, T, T, 1, 1), -math.inf).amax(2).detach()  # [B,T,H,dv]
        if shift.dim():                                                        # e [B,t,i,H,dv]
            mu = read(p, vc)
            z = (p * (u.unsqueeze(1) - shift.unsqueeze(2)).exp()).sum(2)
        elif p is not None:
            mu = read(p, vc)
            z = read(p, (u - shift).exp())                                     # sum_i p_t(i) e^{u_i - cap}
        else:                                                                  # SDPA: both streams in one read
            both = read_values(torch.cat([vc, (u - shift).exp()], -1))
            mu, z = both[..., :dv], both[..., dv:]
        tiny = torch.finfo(x.dtype).tiny
        free_energy = (torch.log(z.clamp_min(tiny)) + shift) / beta            # eq. 4 restored
        if Tf:
            lam = split_heads(torch.sigmoid(modulated(linear(x, w, "lambda_proj"), c_lambda)), heads)
            y = (1 - lam) * mu + lam * free_energy                             # eq. 10
        else:
            y = free_energy                                                    # F at beta = 1
    if G:
        a = split_heads(F.softplus(modulated(linear(x, w, "gate_proj"), c_gate)), heads)
        y = y * gate_rms_normalise(a, eps)                                     # eq. 11
    return linear(y.reshape(B, T, d), w, "output")
