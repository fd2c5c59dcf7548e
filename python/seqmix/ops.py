"""Typed wrappers of torch.ops.seqmix.*: the seqmix ops with autograd (the fused kernels' hand-written backward,
or ATen's for the naive twins). Tensors are float32 or float64, or bfloat16/float16 (computed in float32, returned
in the input's dtype; decode states keep theirs), on the CPU or a CUDA GPU, all of one call on one device.
Shapes use B batch, T queries, S keys (T <= S: the queries are the last T positions), H heads, dk/dv key/value
width, C channels, N states. `impl` is "auto" (the default: the fastest implementation the inputs' device has),
"fused" (the CPU kernel), "naive" (the readable ATen twin the tests hold the others to, on every device), for
attention and FEM's softmax read "torch" (PyTorch's own torch.nn.functional.scaled_dot_product_attention, with
seqmix's semantics), or for GLA and linear attention "chunked" (ATen matrix products in chunks, any device);
`seqmix.op_table()` lists each op's implementations per device.
"""
import json
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ._library import load_library


def _seqmix_ops():
    """torch.ops.seqmix, once libseqmix_ops.so is loaded (an ImportError says where it was looked for)."""
    load_library()
    return torch.ops.seqmix


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: Optional[float] = None,
              key_mask: Optional[Tensor] = None, impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tensor:
    """Softmax attention softmax_j(scale q_t . k_j) v_j (flash-style when fused: no T x S matrix).

    q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv] -> [B,T,H,dv]. scale defaults to 1/sqrt(dk); causal lets query t
    see keys j <= t + S - T; key_mask [B,S] bool (True = a real key) drops padded keys (whatever they hold).
    cu_seqlens (int64 [N+1], flash-attn's convention) packs N sequences into q, k, v [1, total_T, H, d]: each
    query sees only its own sequence, so the output equals each sequence run alone."""
    return _seqmix_ops().attention(q, k, v, causal, scale, key_mask, impl, cu_seqlens)


def relu_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, eps: float = 1e-12) -> Tensor:
    """HyperMLP's "R" read: ReLU(s_t / sqrt(||s_t||^2 + eps)) v with s_t = (q_t . k_j)_j over the visible keys.

    q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv] -> [B,T,H,dv]."""
    return _seqmix_ops().relu_attention(q, k, v, causal, eps)


def fem_softmax_read(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, cap: float = 40.0, causal: bool = True,
                     scale: Optional[float] = None, key_mask: Optional[Tensor] = None,
                     impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The Free Energy Mixer's read under the softmax prior p = softmax(scale q k^T): (mean, free_energy).

    mean = E_p[clip(v)], free_energy = (1/beta) log E_p[exp(beta clip(v))] per channel, clip to |beta v| <= cap.
    q [B,T,H,dk], k [B,S,H,dk], v [B,S,H,dv], beta [H*dv] or [H,dv] > 0 -> two [B,T,H,dv]. The fused kernel
    takes cap <= 40 in float32 (any cap in (0, 43] in float64); impl="torch" (auto's choice on a GPU) is one
    scaled_dot_product_attention call over [clip(v), exp(beta clip(v) - cap)], as the FEM authors' layer reads. cu_seqlens packs sequences (each read alone, once
    per sequence: eager only)."""
    return _seqmix_ops().fem_softmax_read(q, k, v, beta, cap, causal, scale, key_mask, impl, cu_seqlens)


def fem_linear_read(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, cap: float = 40.0, causal: bool = True,
                    impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The FEM read under the linear-attention prior w_tj = q_t . k_j (q, k non-negative features):
    (mean, free_energy), computed as the FEM layer does (one read of [clip(v), exp(beta clip(v) - cap)] in
    float64). q, k [B,T,H,dk], v [B,T,H,dv], beta [H*dv] -> two [B,T,H,dv]. cu_seqlens packs sequences as in
    linear_attention."""
    return _seqmix_ops().fem_linear_read(q, k, v, beta, cap, causal, impl, cu_seqlens)


def fem_gla_read(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, cap: float = 40.0,
                 impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The FEM read under the gated-linear-attention prior (decay exp(log_decay) per head or key feature and
    step, causal). q, k [B,T,H,dk], v [B,T,H,dv], log_decay [B,T,H] or [B,T,H,dk] <= 0, beta [H*dv] ->
    (mean, free_energy) [B,T,H,dv]. cu_seqlens packs sequences as in gla."""
    return _seqmix_ops().fem_gla_read(q, k, v, log_decay, beta, cap, impl, cu_seqlens)


def fem_aft_read(k: Tensor, v: Tensor, beta: Tensor, cap: float = 40.0, mask: Optional[Tensor] = None,
                 impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The FEM read under the AFT / LRNN-softmax prior w_ti = exp(k_i), i <= t, per channel.
    k, v [B,T,C], beta [C], mask [B,T] bool (True = real token) -> (mean, free_energy) [B,T,C]. cu_seqlens packs
    sequences as in aft."""
    return _seqmix_ops().fem_aft_read(k, v, beta, cap, mask, impl, cu_seqlens)


def fem_scale_values(v: Tensor, beta: Tensor, cap: float) -> Tuple[Tensor, Tensor]:
    """(clipped, scaled): v clamped to |beta v| <= cap (cap 0: no clamp) and beta times it. v [...,C], beta [C]."""
    return _seqmix_ops().fem_scale_values(v, beta, cap)


def fem_restore(z: Tensor, shift: Tensor, beta: Tensor) -> Tensor:
    """(log z + shift) / beta: the free energy from a read z of exp(beta v - shift). z [...,C], beta [C]."""
    return _seqmix_ops().fem_restore(z, shift, beta)


def _state_pair(initial_state):
    return (None, None) if initial_state is None else tuple(initial_state)


def _with_state(numerator, normaliser, kv, k_sum, output_final_state):
    return (numerator, normaliser, (kv, k_sum)) if output_final_state else (numerator, normaliser)


def linear_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, impl: str = "auto",
                     scale: Optional[float] = None, initial_state: Optional[Tuple[Tensor, Tensor]] = None,
                     output_final_state: bool = False, cu_seqlens: Optional[Tensor] = None):
    """Linear attention's (numerator, normaliser): sum_j (q_t . k_j) v_j and sum_j q_t . k_j over j <= t
    (causal) or all j. q, k [B,T,H,dk], v [B,T,H,dv] -> [B,T,H,dv] and [B,T,H].

    As flash-linear-attention: scale multiplies q (default: none); initial_state (kv [B,H,dk,dv], k_sum [B,H,dk])
    continues the scan from earlier positions (causal); output_final_state=True also returns the state after the
    last position, (numerator, normaliser, (kv, k_sum)), ready to be the next chunk's initial_state. cu_seqlens
    (int64 [N+1]) packs N sequences into [1, total_T, ...], each read alone (states [N, ...])."""
    kv, k_sum = _state_pair(initial_state)
    return _with_state(*_seqmix_ops().linear_attention(q, k, v, causal, impl, scale, kv, k_sum, output_final_state,
                                                       cu_seqlens), output_final_state)


def gla(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, impl: str = "auto", scale: Optional[float] = None,
        initial_state: Optional[Tuple[Tensor, Tensor]] = None, output_final_state: bool = False,
        cu_seqlens: Optional[Tensor] = None):
    """Gated linear attention's (numerator, normaliser): S_t = diag(exp(a_t)) S_{t-1} + k_t v_t^T, numerator
    q_t S_t, normaliser q_t . z_t. q, k [B,T,H,dk], v [B,T,H,dv], log_decay a <= 0 per head [B,T,H] (chunked scan
    when fused) or per key feature [B,T,H,dk] (the GLA paper's gates; recurrent scan when fused). scale,
    initial_state (kv, k_sum) and output_final_state as in linear_attention. cu_seqlens (int64 [N+1]) packs N
    sequences into [1, total_T, ...], each scanned from its own state (initial and final states [N, ...])."""
    kv, k_sum = _state_pair(initial_state)
    return _with_state(*_seqmix_ops().gla(q, k, v, log_decay, impl, scale, kv, k_sum, output_final_state,
                                          cu_seqlens), output_final_state)


def delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, impl: str = "auto", scale: Optional[float] = None,
               initial_state: Optional[Tuple[Tensor, Tensor]] = None, output_final_state: bool = False,
               cu_seqlens: Optional[Tensor] = None):
    """The delta rule's (numerator, normaliser): S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T, numerator
    S_t^T q_t, normaliser the same read of a value of ones. q, k [B,T,H,dk] (unit norm in the layers), v [B,T,H,dv],
    beta [B,T,H] in (0, 1). Parallel form (one triangular solve); naive only. scale, initial_state (kv, k_sum) and
    output_final_state as in linear_attention; cu_seqlens packs sequences (one state per sequence, each run alone:
    eager only)."""
    kv, k_sum = _state_pair(initial_state)
    return _with_state(*_seqmix_ops().delta_rule(q, k, v, beta, impl, scale, kv, k_sum, output_final_state,
                                                 cu_seqlens), output_final_state)


def aft(k: Tensor, v: Tensor, mask: Optional[Tensor] = None, impl: str = "auto",
        initial_state: Optional[Tuple[Tensor, Tensor, Tensor]] = None, output_final_state: bool = False,
        cu_seqlens: Optional[Tensor] = None):
    """AFT's (numerator, normaliser) per channel: sum_{i<=t} exp(k_i - m_t) v_i and sum_{i<=t} exp(k_i - m_t),
    m_t the causal running max. k, v [B,T,C], mask [B,T] bool -> two [B,T,C].

    initial_state (state_numerator, state_normaliser, key_max), each [B,C] as aft_initial_state / aft_step keep
    them, continues from earlier positions; output_final_state=True also returns the state after the last
    position, (numerator, normaliser, state). cu_seqlens (int64 [N+1]) packs N sequences into [1, total_T, C],
    each read from a fresh state (or its own row of initial_state, [N,C] each)."""
    numerator_0, normaliser_0, key_max = (None, None, None) if initial_state is None else tuple(initial_state)
    numerator, normaliser, *state = _seqmix_ops().aft(k, v, mask, impl, numerator_0, normaliser_0, key_max,
                                                      output_final_state, cu_seqlens)
    return (numerator, normaliser, tuple(state)) if output_final_state else (numerator, normaliser)


def ssm_scan(u: Tensor, delta: Tensor, A: Tensor, b: Tensor, c: Tensor, impl: str = "auto",
             initial_state: Optional[Tensor] = None, output_final_state: bool = False,
             cu_seqlens: Optional[Tensor] = None):
    """Diagonal selective scan: h_t = exp(delta_t A) h_{t-1} + delta_t b_t u_t, y_t = sum_n c_t[n] h_t[:, n].
    u, delta [B,T,C], A [C,N] < 0, b, c [B,T,N] -> y [B,T,C]. initial_state h_0 [B,C,N] continues the scan;
    output_final_state=True returns (y, h_T). cu_seqlens (int64 [N+1]) packs N sequences into [1, total_T, ...],
    each scanned from zero (or its own row of initial_state, [N,C,N_state])."""
    y, state = _seqmix_ops().ssm_scan(u, delta, A, b, c, impl, initial_state, output_final_state, cu_seqlens)
    return (y, state) if output_final_state else y


def normalised_read(numerator: Tensor, normaliser: Tensor, eps: float) -> Tensor:
    """numerator / max(normaliser, eps), the normaliser [B,T,H] broadcast over dv (or [B,T,C] per channel)."""
    return _seqmix_ops().normalised_read(numerator, normaliser, eps)


def ela(q: Tensor, k: Tensor, v: Tensor, kernel: str = "hadamard_exp", causal: bool = True, eps: float = 1e-8,
        impl: str = "auto", scale: Optional[float] = None,
        initial_state: Optional[Tuple[Tensor, Tensor, Tensor]] = None, output_final_state: bool = False,
        cu_seqlens: Optional[Tensor] = None):
    """Exact Linear Attention: sum_j K(q_t, k_j) v_j / sum_j K(q_t, k_j) in O(T) through the kernel's exact
    features. kernel: hadamard_exp (sum_d exp(q_d + k_d)), sum_sq_euclidean (||q+k||^2), sub_sq_euclidean
    (||q-k||^2), direction_magnitude. q, k [B,T,H,dk], v [B,T,H,dv] -> [B,T,H,dv].

    scale multiplies q. Causal only: initial_state (kv, k_sum, key_max) as ela_initial_state / ela_step keep it
    (key_max empty for the polynomial kernels) continues from earlier positions; output_final_state=True returns
    (y, state). cu_seqlens packs sequences (one state per sequence, [N,...]; each run alone: eager only)."""
    kv, k_sum, key_max = (None, None, None) if initial_state is None else tuple(initial_state)
    y, *state = _seqmix_ops().ela(q, k, v, kernel, causal, eps, impl, scale, kv, k_sum, key_max, output_final_state,
                                  cu_seqlens)
    return (y, tuple(state)) if output_final_state else y


def hypermlp_read(q: Tensor, k: Tensor, v: Tensor, s1: Optional[Tensor] = None,
                  mixing1: Optional[Tuple[Tensor, Tensor, Tensor]] = None, s2: Optional[Tensor] = None,
                  mixing2: Optional[Tuple[Tensor, Tensor, Tensor]] = None, activation: str = "relu",
                  layout: str = "lag", eps: float = 1e-12, scale: float = 1.0, block: int = 256,
                  impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tensor:
    """HyperMLP's read: attention as a two-layer MLP over the context with diagonal-plus-low-rank (DPLR) mixing
    along the sequence before (s1, mixing1) and after (s2, mixing2) the activation (relu, glu or softmax).

    q [B,T,Hq,dqk], k [B,S,Hq,dqk], v [B,S,H,dvo] -> [B,T,H,dvo] (causal; Hq = H, or 2H for glu). A mixing is
    (diag [Hm,L], U [Hm,L,r], Vt [Hm,r,L]) with the gates s [B,T,Hm,r]; layout "lag" (row L-1-lag) or
    "forward" (row = position). impl "fused" is the blocked read, "naive" the dense one (src/ops/hypermlp).
    cu_seqlens packs sequences (each read alone from its first token, the mixing shared: eager only)."""
    d1, u1, vt1 = mixing1 if mixing1 is not None else (None, None, None)
    d2, u2, vt2 = mixing2 if mixing2 is not None else (None, None, None)
    return _seqmix_ops().hypermlp_read(q, k, v, s1, d1, u1, vt1, s2, d2, u2, vt2, activation, layout, eps, scale, block,
                                       impl, cu_seqlens)


def mha2nd1st_read(q: Tensor, k: Tensor, temperature: Tensor, bias_scale: Tensor, causal: bool = True,
                   impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tensor:
    """MHA2nd1st's read u + c Cov_p(k) u, u = q - E_p[k], p_j = softmax_j(-(||q - k_j||^2) / (2 T_h)).
    q [B,T,H,d], k [B,S,H,d], temperature [H] > 0, bias_scale [H] -> [B,T,H,d]. "naive" forms Cov_p(k).
    cu_seqlens packs sequences (each read alone: eager only)."""
    return _seqmix_ops().mha2nd1st_read(q, k, temperature, bias_scale, causal, impl, cu_seqlens)


def light2nd1st_read(q: Tensor, k: Tensor, v: Tensor, scale: float, tau: Tensor, causal: bool = True,
                     impl: str = "auto", cu_seqlens: Optional[Tensor] = None) -> Tensor:
    """LightMHA2nd1st's read vbar + tau Cov_p(v) vbar, vbar = E_p[v], p = softmax(scale q k^T).
    q, k [B,*,H,dk], v [B,S,H,dv], tau [H] -> [B,T,H,dv]. "naive" forms Cov_p(v). cu_seqlens packs sequences
    (each read alone: eager only)."""
    return _seqmix_ops().light2nd1st_read(q, k, v, scale, tau, causal, impl, cu_seqlens)


def fem_ssm_read(v: Tensor, delta: Tensor, A: Tensor, b: Tensor, c: Tensor, beta: Tensor,
                 D: Optional[Tensor] = None, cap: float = 40.0, impl: str = "auto",
                 cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The FEM read under the selective-SSM prior, per channel: weights are the scan's impulse response,
    normalised by the scan of ones (with the skip D u in both, as the FEM layer reads it).
    v, delta [B,T,C], A [C,N] < 0, b, c [B,T,N] >= 0, D [C], beta [C] -> (mean, free_energy) [B,T,C].
    cu_seqlens packs sequences as in ssm_scan."""
    return _seqmix_ops().fem_ssm_read(v, delta, A, b, c, D, beta, cap, impl, cu_seqlens)


# ---- decode: one position at a time, the state in and the updated state out ------------------------------

def linear_attention_initial_state(batch: int, heads: int, dk: int, dv: int,
                                   dtype: Optional[torch.dtype] = None,
                                   device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor]:
    """Empty causal state (kv [B,H,dk,dv], k_sum [B,H,dk]) of linear_attention_step and gla_step."""
    return _seqmix_ops().linear_attention_initial_state(batch, heads, dk, dv, dtype, device)


def linear_attention_step(q_t: Tensor, k_t: Tensor, v_t: Tensor, state: Tuple[Tensor, Tensor]):
    """One causal step: q_t, k_t [B,H,dk], v_t [B,H,dv] -> (numerator [B,1,H,dv], normaliser [B,1,H], state)."""
    numerator, normaliser, kv, k_sum = _seqmix_ops().linear_attention_step(q_t, k_t, v_t, *state)
    return numerator, normaliser, (kv, k_sum)


def gla_step(q_t: Tensor, k_t: Tensor, v_t: Tensor, log_decay_t: Tensor, state: Tuple[Tensor, Tensor]):
    """One GLA step: q_t, k_t [B,H,dk], v_t [B,H,dv], log_decay_t [B,H] -> (numerator, normaliser, state)."""
    numerator, normaliser, kv, k_sum = _seqmix_ops().gla_step(q_t, k_t, v_t, log_decay_t, *state)
    return numerator, normaliser, (kv, k_sum)


def delta_rule_step(q_t: Tensor, k_t: Tensor, v_t: Tensor, beta_t: Tensor, state: Tuple[Tensor, Tensor]):
    """One delta-rule step on linear attention's state (linear_attention_initial_state): q_t, k_t [B,H,dk],
    v_t [B,H,dv], beta_t [B,H] -> (numerator, normaliser, state)."""
    numerator, normaliser, kv, k_sum = _seqmix_ops().delta_rule_step(q_t, k_t, v_t, beta_t, *state)
    return numerator, normaliser, (kv, k_sum)


def aft_initial_state(batch: int, channels: int, dtype: Optional[torch.dtype] = None,
                      device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Empty AFT state: running numerator, normaliser [B,C] and key maximum [B,C] (-1e30)."""
    return _seqmix_ops().aft_initial_state(batch, channels, dtype, device)


def aft_step(k_t: Tensor, v_t: Tensor, state: Tuple[Tensor, Tensor, Tensor], mask_t: Optional[Tensor] = None):
    """One AFT step: k_t, v_t [B,C], mask_t [B] bool -> (numerator [B,1,C], normaliser [B,1,C], state)."""
    numerator, normaliser, *next_state = _seqmix_ops().aft_step(k_t, v_t, *state, mask_t)
    return numerator, normaliser, tuple(next_state)


def ssm_initial_state(batch: int, channels: int, states: int, dtype: Optional[torch.dtype] = None,
                      device: Optional[torch.device] = None) -> Tensor:
    """Empty selective-scan state h [B,C,N] (zeros)."""
    return torch.zeros(batch, channels, states, dtype=dtype or torch.float32, device=device)


def ssm_step(u_t: Tensor, delta_t: Tensor, A: Tensor, b_t: Tensor, c_t: Tensor, state: Tensor):
    """One scan step: u_t, delta_t [B,C], A [C,N], b_t, c_t [B,N], state [B,C,N] -> (y_t [B,C], state)."""
    return tuple(_seqmix_ops().ssm_step(u_t, delta_t, A, b_t, c_t, state))


def ela_initial_state(batch: int, heads: int, dk: int, dv: int, kernel: str = "hadamard_exp",
                      dtype: Optional[torch.dtype] = None,
                      device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Empty ELA state (kv [B,H,F,dv], k_sum [B,H,F], key_max [B,H,dk] for hadamard_exp, else empty [0]),
    F the kernel's feature width: nothing grows with the sequence."""
    return _seqmix_ops().ela_initial_state(batch, heads, dk, dv, kernel, dtype, device)


def ela_step(q_t: Tensor, k_t: Tensor, v_t: Tensor, state: Tuple[Tensor, Tensor, Tensor],
             kernel: str = "hadamard_exp", eps: float = 1e-8):
    """One causal ELA step: q_t, k_t [B,H,dk], v_t [B,H,dv] -> (y_t [B,H,dv], state)."""
    y, *next_state = _seqmix_ops().ela_step(q_t, k_t, v_t, *state, kernel, eps)
    return y, tuple(next_state)


def op_table() -> dict:
    """The op table (each op family's src/ops/<family>/declare.cpp): {"families": [{"name", "torch_ops": [{"name",
    "impls", "impls_on": {"cpu": [...], "cuda": [...]}}], "bench_cases"}]}; impls is empty for an operator without
    an `impl` argument, and impls_on says which of them run on each device ("auto" picks fused, then torch, then naive among them)."""
    return json.loads(_seqmix_ops().op_table())


def op_impls(op: str) -> List[str]:
    """The implementations the operator `op` takes as `impl` (e.g. ["fused", "naive", "torch"] for attention)."""
    for family in op_table()["families"]:
        for entry in family["torch_ops"]:
            if entry["name"] == op:
                return entry["impls"]
    raise ValueError(f"seqmix: no operator '{op}' in the op table")


def read_safetensors_cpp(path: str):
    """The tensors of a safetensors file as read by seqmix's C++ reader: dict name -> tensor (file order)."""
    names, tensors = _seqmix_ops().read_safetensors(path)
    return dict(zip(names, tensors))


__all__ = [
    "attention", "relu_attention", "fem_softmax_read", "fem_linear_read", "fem_gla_read", "fem_aft_read",
    "fem_scale_values", "fem_restore", "linear_attention", "gla", "aft", "ssm_scan", "normalised_read", "ela",
    "hypermlp_read", "mha2nd1st_read", "light2nd1st_read", "read_safetensors_cpp", "fem_ssm_read",
    "linear_attention_initial_state", "linear_attention_step", "gla_step", "aft_initial_state", "aft_step",
    "ssm_initial_state", "ssm_step", "ela_initial_state", "ela_step", "op_table", "op_impls", "delta_rule",
    "delta_rule_step",
]
# Helpers written in Python (no operator behind them).
PYTHON_ONLY = ["ssm_initial_state", "op_impls"]
# Operators of the package, not of an op family (src/python/): the module operators are how torch.compile calls
# seqmix's modules (python/seqmix/_compile.py).
PACKAGE_OPS = ["read_safetensors", "registry", "build_info", "module_forward", "module_backward", "module_output_dtype"]
