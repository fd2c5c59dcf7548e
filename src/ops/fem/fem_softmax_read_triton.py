"""The FEM softmax read in Triton: forward and backward kernels of fem_softmax_read (README.md, "The Triton
kernels"), and a thin torch.autograd.Function that joins them so Python calls them like the op.

    mean_tj = sum_i p_ti c_ij,   free_energy_tj = (1/beta_j) log sum_i p_ti exp(u_ij),
    p = softmax(scale q k^T) over the visible keys, c = clamp(v, -cap/beta, cap/beta), u = beta c.

The kernels are written for Triton's interpreter as much as for a GPU (TRITON_INTERPRET=1 runs them on CPU
tensors): no autotuning, plain constexpr block sizes, nothing called on program_id's result. Every launch's
geometry (grid, constexprs, warps) comes from one function per kernel (`*_launch`), which the C++ launcher of
the ahead-of-time compiled cubins mirrors; the argument lists are documented above each kernel, in order.

Layout conventions shared by all kernels (C++ passes exactly these):
* q, k, v, mean, free_energy, lse and every gradient are contiguous and row-major over (row, head, channel):
  q [B,T,H,DK] is read as rows = B*T (unpacked) or total_T (packed), element (row, h, d) at
  (row * H + h) * DK + d. Offsets are computed in int64.
* A "sequence" n is rows cu_q[n] .. cu_q[n+1] of the queries and cu_k[n] .. cu_k[n+1] of the keys (int64
  offsets, [N+1]). Unpacked batches pass cu_q = T * arange(B+1), cu_k = S * arange(B+1) (so n is the batch row);
  packed batches (cu_seqlens, B = 1, T == S) pass cu_q = cu_k = cu_seqlens. Queries are the last T_n of the S_n
  key positions (causal: query t sees keys j <= t + S_n - T_n).
* key_mask is int8 [B,S] (1 = a real key; the bool tensor's bytes) and first_real int32 [B] the index of each
  batch row's first real key (S if none); with has_mask = 0 neither is read (C++ may pass null).
* Pointers are 16-byte aligned and DK, DV divisible by 16 (the cubins are compiled with that specialisation, as
  Triton's JIT makes it); every kernel takes two more pointer arguments after the listed ones, which Triton appends
  (global and profile scratch): pass null, the kernels use none.
"""
import math

import torch
import triton
import triton.language as tl

# Under TRITON_INTERPRET=1, tl.dot on bfloat16 operands multiplies the bit patterns (triton issue 11584), while
# bfloat16 loads, stores and casts are right. The interpreter tests set this to tl.constexpr(True) so that every
# product casts its operands to float32 first; compiled kernels never do (it stays False in every cubin).
INTERPRETER_DOT_IN_FP32 = tl.constexpr(False)

# The shift floor's span: n_j >= cap - SHIFT_SPAN bounds exp(u - n) by e^40 for keys not yet in the running max
# (src/ops/fem/fused_kernels.h, kFemShiftSpan); the kernels take 0 < cap <= SHIFT_SPAN.
SHIFT_SPAN = 40.0
_SHIFT_SPAN = tl.constexpr(SHIFT_SPAN)

# Head widths dk, dv (any pair): multiples of 16 up to 128, held in blocks of 64 or 128 (BLOCK_WIDTHS); the input
# dtypes float32, float16, bfloat16. The cubins assume 16-byte aligned pointers and widths divisible by 16 (the
# specialisation Triton's JIT makes), which these guarantee for contiguous tensors.
HEAD_WIDTHS = tuple(range(16, 129, 16))
BLOCK_WIDTHS = (64, 128)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _dot(a, b, EXACT: tl.constexpr):
    """a @ b with a float32 result. EXACT (float32 inputs): float32 products on the FMA units ("ieee", exact
    products); otherwise 16-bit operands on tensor cores, or float32 operands through tf32 (float16's 10 mantissa
    bits, float32's range)."""
    if INTERPRETER_DOT_IN_FP32:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif EXACT:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b, input_precision="tf32")
    return c


@triton.jit
def _mixed_dot(x, y, HALF: tl.constexpr, EXACT: tl.constexpr):
    """x @ y where x is a block the kernel computed (probabilities, weights, their gradients) and y a block of
    inputs, float32 result. HALF (float16 inputs): both as float16, x keeping 11 bits as FlashAttention's P does.
    Otherwise both as float32: on bfloat16 inputs through tf32, since x rounded to bfloat16's 8 bits would double the
    error of the result against its own final rounding (y widens exactly); on float32 inputs exact ("ieee")."""
    if HALF:
        r = _dot(x.to(tl.float16), y.to(tl.float16), EXACT)
    else:
        r = _dot(x.to(tl.float32), y.to(tl.float32), EXACT)
    return r


@triton.jit
def _visible(offs_m, offs_n, S_n, off, causal, has_mask, mask_row, first_real_n):
    """[BM, BN] bool: query offs_m (rows of the sequence) sees key offs_n. Causally key j <= t + off; with a
    key_mask only real keys, except that a row whose visible keys are all padding sees its own position t + off
    (the naive op's rule, src/ops/attention/naive.cpp visible_keys)."""
    in_range = offs_n < S_n
    last = tl.where(causal != 0, offs_m + off, S_n - 1)  # [BM]: the last key each row may see
    vis = in_range[None, :] & (offs_n[None, :] <= last[:, None])
    if has_mask != 0:
        real = tl.load(mask_row + offs_n, mask=in_range, other=0) != 0
        empty = first_real_n > last  # [BM]: no real key up to the row's limit
        own = (offs_n[None, :] == (offs_m + off)[:, None]) & empty[:, None]
        vis = vis & (real[None, :] | own)
    return vis


# ---- forward ------------------------------------------------------------------------------------------------
# fem_softmax_read_fwd_kernel arguments, in order (pointers to contiguous tensors):
#   q            *dtype  [rows_q, H, DK]
#   k            *dtype  [rows_k, H, DK]
#   v            *dtype  [rows_k, H, DV]
#   beta         *dtype  [H*DV], > 0
#   key_mask     *i8     [B, S] (unpacked only; read when has_mask)
#   first_real   *i32    [B]    (read when has_mask)
#   cu_q, cu_k   *i64    [N+1]  row offsets of each sequence's queries and keys
#   mean         *fp32   [rows_q, H, DV]   out: E_p[c]
#   free_energy  *fp32   [rows_q, H, DV]   out: F = L / beta
#   lse          *fp32   [rows_q, H]       out: the row log-sum-exp of the scores (saved for the backward)
#   H, DK, DV    i32     heads and head widths (DK, DV multiples of 16, at most BLOCK_DK, BLOCK_DV)
#   scale, cap   fp32    (0 < cap <= 40)
#   causal, has_mask  i32 (0 or 1)
#   constexprs: BLOCK_M (query rows per program), BLOCK_N (keys per step), BLOCK_DK, BLOCK_DV (head width
#               blocks, powers of two), EXACT (float32 inputs)
# grid: (cdiv(max_n T_n, BLOCK_M), N * H); a program whose rows start past its sequence's end returns at once.
@triton.jit
def fem_softmax_read_fwd_kernel(q, k, v, beta, key_mask, first_real, cu_q, cu_k, mean, free_energy, lse, H, DK, DV,
                                scale, cap, causal, has_mask, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr, EXACT: tl.constexpr):
    HALF: tl.constexpr = q.dtype.element_ty == tl.float16
    pid_m = tl.program_id(0)
    pid_nh = tl.program_id(1)
    n = pid_nh // H
    h = pid_nh % H
    q0 = tl.load(cu_q + n)
    k0 = tl.load(cu_k + n)
    T_n = (tl.load(cu_q + n + 1) - q0).to(tl.int32)
    S_n = (tl.load(cu_k + n + 1) - k0).to(tl.int32)
    r0 = pid_m * BLOCK_M
    if r0 >= T_n:
        return
    off = S_n - T_n
    offs_m = r0 + tl.arange(0, BLOCK_M)
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    dk_ok = offs_dk < DK
    dv_ok = offs_dv < DV
    row_ok = offs_m < T_n
    q_rows = (q0 + offs_m).to(tl.int64) * H + h
    b_q = tl.load(q + q_rows[:, None] * DK + offs_dk[None, :], mask=row_ok[:, None] & dk_ok[None, :], other=0.0)
    b_beta = tl.load(beta + h * DV + offs_dv, mask=dv_ok, other=1.0).to(tl.float32)
    limit = cap / b_beta
    mask_row = key_mask + k0
    first_real_n = 0
    if has_mask != 0:
        first_real_n = tl.load(first_real + n)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc_mu = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    acc_e = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    # The per-channel shift: running max of u over the keys every row of this block sees, floored at cap - 40.
    shift = tl.zeros([BLOCK_DV], tl.float32) + (cap - _SHIFT_SPAN)
    r1 = tl.minimum(r0 + BLOCK_M, T_n)
    # Keys past the last row's limit are hidden from every row; keys up to `shared` are seen by all of them.
    hi = tl.where(causal != 0, tl.minimum(r1 - 1 + off, S_n - 1) + 1, S_n)
    shared = tl.where(causal != 0, r0 + off, S_n - 1)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_ok = offs_n < S_n
        k_rows = (k0 + offs_n).to(tl.int64) * H + h
        b_k = tl.load(k + k_rows[:, None] * DK + offs_dk[None, :], mask=key_ok[:, None] & dk_ok[None, :], other=0.0)
        b_v = tl.load(v + k_rows[:, None] * DV + offs_dv[None, :], mask=key_ok[:, None] & dv_ok[None, :],
                      other=0.0).to(tl.float32)
        b_c = tl.minimum(tl.maximum(b_v, -limit[None, :]), limit[None, :])
        b_u = b_beta[None, :] * b_c
        # Online softmax of the scores.
        s = _dot(b_q, tl.trans(b_k), EXACT) * scale
        vis = _visible(offs_m, offs_n, S_n, off, causal, has_mask, mask_row, first_real_n)
        s = tl.where(vis, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that sees nothing yet
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
        # The shift grows with the keys every row sees; the exp branch is rescaled to it.
        shared_u = tl.where((key_ok & (offs_n <= shared))[:, None], b_u, float("-inf"))
        shift_new = tl.maximum(shift, tl.max(shared_u, 0))
        gamma = tl.exp(shift - shift_new)
        shift = shift_new
        b_e = tl.exp(b_u - shift_new[None, :])  # in [e^-80, e^40]: float32 operands (beyond float16's range)
        acc_mu = acc_mu * alpha[:, None] + _mixed_dot(p, b_c, HALF, EXACT)
        acc_e = acc_e * (alpha[:, None] * gamma[None, :]) + _dot(p, b_e, EXACT)

    has_keys = l_i > 0
    l_safe = tl.where(has_keys, l_i, 1.0)
    log_l = tl.log(l_safe)
    b_mean = acc_mu / l_safe[:, None]
    b_log = shift[None, :] + tl.log(tl.maximum(acc_e, 1.1754943508222875e-38)) - log_l[:, None]
    out = q_rows[:, None] * DV + offs_dv[None, :]
    ok = row_ok[:, None] & dv_ok[None, :]
    tl.store(mean + out, b_mean, mask=ok)
    tl.store(free_energy + out, b_log / b_beta[None, :], mask=ok)
    tl.store(lse + q_rows, tl.where(has_keys, m_i + log_l, float("-inf")), mask=row_ok)


# ---- backward -----------------------------------------------------------------------------------------------
# Both backward kernels read, besides the forward's inputs (q, k, v, beta, key_mask, first_real, cu_q, cu_k):
#   d_mean  *dtype [rows_q, H, DV]  the gradient of mean
#   g       *fp32  [rows_q, H, DV]  G = dL exp(cap - L), dL = dF / beta, L = beta F (README.md)
#   lse     *fp32  [rows_q, H]      saved by the forward
#   delta   *fp32  [rows_q, H]      Delta = d_mean . mean + sum_j dL_j
#
# fem_softmax_read_bwd_dkdv_kernel arguments, in order:
#   q, k, v, beta, key_mask, first_real, cu_q, cu_k, d_mean, g, lse, delta   (as above)
#   dk           *fp32 [rows_k, H, DK]  out: the gradient of k
#   dv           *fp32 [rows_k, H, DV]  out: the gradient of v
#   dbeta_terms  *fp32 [rows_k, H, DV]  out: per key, c du + the clamp's share (summed over rows by the caller)
#   H, DK, DV i32, scale fp32, cap fp32, causal i32, has_mask i32
#   constexprs: BLOCK_M (query rows per step), BLOCK_N (keys per program), BLOCK_DK, BLOCK_DV, EXACT
# grid: (cdiv(max_n S_n, BLOCK_N), N * H).
@triton.jit
def fem_softmax_read_bwd_dkdv_kernel(q, k, v, beta, key_mask, first_real, cu_q, cu_k, d_mean, g, lse, delta, dk, dv,
                                     dbeta_terms, H, DK, DV, scale, cap, causal, has_mask, BLOCK_M: tl.constexpr,
                                     BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr,
                                     EXACT: tl.constexpr):
    HALF: tl.constexpr = q.dtype.element_ty == tl.float16
    pid_n = tl.program_id(0)
    pid_nh = tl.program_id(1)
    n = pid_nh // H
    h = pid_nh % H
    q0 = tl.load(cu_q + n)
    k0 = tl.load(cu_k + n)
    T_n = (tl.load(cu_q + n + 1) - q0).to(tl.int32)
    S_n = (tl.load(cu_k + n + 1) - k0).to(tl.int32)
    start_n = pid_n * BLOCK_N
    if start_n >= S_n:
        return
    off = S_n - T_n
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    dk_ok = offs_dk < DK
    dv_ok = offs_dv < DV
    key_ok = offs_n < S_n
    k_rows = (k0 + offs_n).to(tl.int64) * H + h
    b_k = tl.load(k + k_rows[:, None] * DK + offs_dk[None, :], mask=key_ok[:, None] & dk_ok[None, :], other=0.0)
    io_k = k_rows[:, None] * DV + offs_dv[None, :]
    ok_k = key_ok[:, None] & dv_ok[None, :]
    b_beta = tl.load(beta + h * DV + offs_dv, mask=dv_ok, other=1.0).to(tl.float32)
    limit = cap / b_beta
    b_c = tl.minimum(tl.maximum(tl.load(v + io_k, mask=ok_k, other=0.0).to(tl.float32), -limit[None, :]),
                     limit[None, :])
    b_ecap = tl.exp(b_beta[None, :] * b_c - cap)  # exp(u - cap) in [e^{-2 cap}, 1]
    mask_row = key_mask + k0
    first_real_n = 0
    if has_mask != 0:
        first_real_n = tl.load(first_real + n)

    acc_dk = tl.zeros([BLOCK_N, BLOCK_DK], tl.float32)
    acc_dc = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    acc_du = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    # The first query that sees key start_n (a row that reads its own padded key sees it causally too).
    lo = tl.where(causal != 0, tl.maximum(start_n - off, 0), 0)
    for start_m in range(lo, T_n, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < T_n
        q_rows = (q0 + offs_m).to(tl.int64) * H + h
        b_q = tl.load(q + q_rows[:, None] * DK + offs_dk[None, :], mask=row_ok[:, None] & dk_ok[None, :], other=0.0)
        io = q_rows[:, None] * DV + offs_dv[None, :]
        ok = row_ok[:, None] & dv_ok[None, :]
        b_dmu = tl.load(d_mean + io, mask=ok, other=0.0)
        b_g = tl.load(g + io, mask=ok, other=0.0)
        b_lse = tl.load(lse + q_rows, mask=row_ok, other=0.0)
        b_delta = tl.load(delta + q_rows, mask=row_ok, other=0.0)
        # Transposed blocks [BLOCK_N keys, BLOCK_M rows]: P^T = exp(scale K Q^T - lse).
        st = _dot(b_k, tl.trans(b_q), EXACT) * scale
        vis = tl.trans(_visible(offs_m, offs_n, S_n, off, causal, has_mask, mask_row, first_real_n))
        pt = tl.where(vis & row_ok[None, :], tl.exp(st - b_lse[None, :]), 0.0)
        acc_dc += _mixed_dot(pt, b_dmu, HALF, EXACT)
        acc_du += _dot(pt, b_g, EXACT)
        dpt = _mixed_dot(b_c, tl.trans(b_dmu), HALF, EXACT) + _dot(b_ecap, tl.trans(b_g), EXACT)
        dst = pt * (dpt - b_delta[None, :])
        acc_dk += _mixed_dot(dst, b_q, HALF, EXACT)

    # The clamp and scale in reverse: dc_total = dc + beta du reaches v inside the limits (half of it on a limit,
    # as at::minimum / at::maximum split ties); beta gets c du and, where clipped, dc_total * (-+cap / beta^2).
    # v is read again rather than kept live through the loop.
    b_v = tl.load(v + io_k, mask=ok_k, other=0.0).to(tl.float32)
    b_c = tl.minimum(tl.maximum(b_v, -limit[None, :]), limit[None, :])
    b_du = tl.exp(b_beta[None, :] * b_c - cap) * acc_du
    d_clipped = acc_dc + b_beta[None, :] * b_du
    outside = (b_v > limit[None, :]) | (b_v < -limit[None, :])
    on_limit = (b_v == limit[None, :]) | (b_v == -limit[None, :])
    share = tl.where(outside, 1.0, tl.where(on_limit, 0.5, 0.0))
    sign = tl.where(b_v >= limit[None, :], 1.0, -1.0)
    tl.store(dv + io_k, (1.0 - share) * d_clipped, mask=ok_k)
    tl.store(dbeta_terms + io_k, b_c * b_du + share * d_clipped * sign * (-cap / (b_beta * b_beta))[None, :],
             mask=ok_k)
    tl.store(dk + k_rows[:, None] * DK + offs_dk[None, :], acc_dk * scale, mask=key_ok[:, None] & dk_ok[None, :])


# fem_softmax_read_bwd_dq_kernel arguments, in order:
#   q, k, v, beta, key_mask, first_real, cu_q, cu_k, d_mean, g, lse, delta   (as above)
#   dq           *fp32 [rows_q, H, DK]  out: the gradient of q
#   H, DK, DV i32, scale fp32, cap fp32, causal i32, has_mask i32
#   constexprs: BLOCK_M (query rows per program), BLOCK_N (keys per step), BLOCK_DK, BLOCK_DV, EXACT
# grid: (cdiv(max_n T_n, BLOCK_M), N * H).
@triton.jit
def fem_softmax_read_bwd_dq_kernel(q, k, v, beta, key_mask, first_real, cu_q, cu_k, d_mean, g, lse, delta, dq, H,
                                   DK, DV, scale, cap, causal, has_mask, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr,
                                   EXACT: tl.constexpr):
    HALF: tl.constexpr = q.dtype.element_ty == tl.float16
    pid_m = tl.program_id(0)
    pid_nh = tl.program_id(1)
    n = pid_nh // H
    h = pid_nh % H
    q0 = tl.load(cu_q + n)
    k0 = tl.load(cu_k + n)
    T_n = (tl.load(cu_q + n + 1) - q0).to(tl.int32)
    S_n = (tl.load(cu_k + n + 1) - k0).to(tl.int32)
    r0 = pid_m * BLOCK_M
    if r0 >= T_n:
        return
    off = S_n - T_n
    offs_m = r0 + tl.arange(0, BLOCK_M)
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    dk_ok = offs_dk < DK
    dv_ok = offs_dv < DV
    row_ok = offs_m < T_n
    q_rows = (q0 + offs_m).to(tl.int64) * H + h
    b_q = tl.load(q + q_rows[:, None] * DK + offs_dk[None, :], mask=row_ok[:, None] & dk_ok[None, :], other=0.0)
    io = q_rows[:, None] * DV + offs_dv[None, :]
    ok = row_ok[:, None] & dv_ok[None, :]
    b_dmu = tl.load(d_mean + io, mask=ok, other=0.0)
    b_g = tl.load(g + io, mask=ok, other=0.0)
    b_lse = tl.load(lse + q_rows, mask=row_ok, other=0.0)
    b_delta = tl.load(delta + q_rows, mask=row_ok, other=0.0)
    b_beta = tl.load(beta + h * DV + offs_dv, mask=dv_ok, other=1.0).to(tl.float32)
    limit = cap / b_beta
    mask_row = key_mask + k0
    first_real_n = 0
    if has_mask != 0:
        first_real_n = tl.load(first_real + n)

    acc_dq = tl.zeros([BLOCK_M, BLOCK_DK], tl.float32)
    r1 = tl.minimum(r0 + BLOCK_M, T_n)
    hi = tl.where(causal != 0, tl.minimum(r1 - 1 + off, S_n - 1) + 1, S_n)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_ok = offs_n < S_n
        k_rows = (k0 + offs_n).to(tl.int64) * H + h
        b_k = tl.load(k + k_rows[:, None] * DK + offs_dk[None, :], mask=key_ok[:, None] & dk_ok[None, :], other=0.0)
        b_v = tl.load(v + k_rows[:, None] * DV + offs_dv[None, :], mask=key_ok[:, None] & dv_ok[None, :],
                      other=0.0).to(tl.float32)
        b_c = tl.minimum(tl.maximum(b_v, -limit[None, :]), limit[None, :])
        b_ecap = tl.exp(b_beta[None, :] * b_c - cap)
        s = _dot(b_q, tl.trans(b_k), EXACT) * scale
        vis = _visible(offs_m, offs_n, S_n, off, causal, has_mask, mask_row, first_real_n)
        p = tl.where(vis & row_ok[:, None], tl.exp(s - b_lse[:, None]), 0.0)
        dp = _mixed_dot(b_dmu, tl.trans(b_c), HALF, EXACT) + _dot(b_g, tl.trans(b_ecap), EXACT)
        ds = p * (dp - b_delta[:, None])
        acc_dq += _mixed_dot(ds, b_k, HALF, EXACT)
    tl.store(dq + q_rows[:, None] * DK + offs_dk[None, :], acc_dq * scale, mask=row_ok[:, None] & dk_ok[None, :])


# ---- launch geometry (mirrored by the C++ launcher) ---------------------------------------------------------

def head_block(d):
    """The compiled block width that holds a head width d (a multiple of 16 up to 128): 64 or 128."""
    return 64 if d <= 64 else 128


# GPU blocks (BLOCK_M query rows, BLOCK_N keys, num_warps) per kernel, input dtype and the larger head block: the
# largest tried that compile without spills for both sm_80 and sm_90 (measured by python/tests/test_triton.py;
# float32 products run on the FMA units, 16-bit ones on tensor cores).
GPU_BLOCKS = {
    (torch.float16, 64): {"fwd": (64, 64, 8), "dkdv": (32, 32, 8), "dq": (64, 64, 8)},
    (torch.float16, 128): {"fwd": (64, 32, 8), "dkdv": (16, 16, 8), "dq": (32, 32, 8)},
    (torch.bfloat16, 64): {"fwd": (64, 64, 8), "dkdv": (32, 32, 8), "dq": (64, 32, 8)},
    (torch.bfloat16, 128): {"fwd": (64, 32, 8), "dkdv": (16, 16, 8), "dq": (32, 32, 8)},
    (torch.float32, 64): {"fwd": (32, 32, 8), "dkdv": (16, 32, 8), "dq": (32, 32, 8)},
    (torch.float32, 128): {"fwd": (32, 16, 8), "dkdv": (16, 16, 8), "dq": (64, 32, 8)},
}


def _geometry(which, dk, dv, dtype, block_m, block_n):
    bm, bn, num_warps = GPU_BLOCKS[(dtype, max(head_block(dk), head_block(dv)))][which]
    bm, bn = block_m or bm, block_n or bn
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_DK": head_block(dk), "BLOCK_DV": head_block(dv),
                  "EXACT": dtype == torch.float32}
    return bm, bn, constexprs, num_warps


def fwd_launch(dk, dv, dtype, max_t, n_heads_total, block_m=None, block_n=None):
    """(grid, constexprs, num_warps, num_stages) of fem_softmax_read_fwd_kernel; n_heads_total = N * H, max_t the
    longest sequence's queries. block_m/block_n replace the GPU blocks (the interpreter tests use 16)."""
    bm, bn, constexprs, num_warps = _geometry("fwd", dk, dv, dtype, block_m, block_n)
    return (triton.cdiv(max_t, bm), n_heads_total), constexprs, num_warps, 1


def bwd_dkdv_launch(dk, dv, dtype, max_s, n_heads_total, block_m=None, block_n=None):
    """(grid, constexprs, num_warps, num_stages) of fem_softmax_read_bwd_dkdv_kernel; max_s the longest
    sequence's keys."""
    bm, bn, constexprs, num_warps = _geometry("dkdv", dk, dv, dtype, block_m, block_n)
    return (triton.cdiv(max_s, bn), n_heads_total), constexprs, num_warps, 1


def bwd_dq_launch(dk, dv, dtype, max_t, n_heads_total, block_m=None, block_n=None):
    """(grid, constexprs, num_warps, num_stages) of fem_softmax_read_bwd_dq_kernel."""
    bm, bn, constexprs, num_warps = _geometry("dq", dk, dv, dtype, block_m, block_n)
    return (triton.cdiv(max_t, bm), n_heads_total), constexprs, num_warps, 1


def launch_configs():
    """Every (kernel, input dtype, constexprs, num_warps, num_stages, arch) the launchers use at the GPU blocks:
    the cubins the C++ launcher embeds (the same geometry on sm_80 and sm_90)."""
    configs = []
    for arch in (80, 90):
        for dtype in DTYPES:
            for bdk in BLOCK_WIDTHS:
                for bdv in BLOCK_WIDTHS:
                    for kernel, launch in ((fem_softmax_read_fwd_kernel, fwd_launch),
                                           (fem_softmax_read_bwd_dkdv_kernel, bwd_dkdv_launch),
                                           (fem_softmax_read_bwd_dq_kernel, bwd_dq_launch)):
                        _, constexprs, num_warps, num_stages = launch(bdk, bdv, dtype, 1, 1)
                        configs.append((kernel, dtype, constexprs, num_warps, num_stages, arch))
    return configs


def signature(kernel, dtype, constexprs):
    """Triton's signature of a kernel for input dtype `dtype` (its runtime arguments are the C++ argument list)."""
    pointer = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}[dtype]
    types = {"q": pointer, "k": pointer, "v": pointer, "beta": pointer, "d_mean": pointer, "key_mask": "*i8",
             "first_real": "*i32", "cu_q": "*i64", "cu_k": "*i64", "H": "i32", "DK": "i32", "DV": "i32",
             "scale": "fp32", "cap": "fp32", "causal": "i32", "has_mask": "i32"}
    return {name: "constexpr" if name in constexprs else types.get(name, "*fp32") for name in kernel.arg_names}


def ast_source(kernel, dtype, constexprs):
    """triton.compile's source for one launch configuration: the signature, the constexprs, and the
    specialisation the cubins are built with (every pointer 16-byte aligned, DK and DV divisible by 16, as
    Triton's JIT would specialise them), e.g. triton.compile(ast_source(...), target=GPUTarget("cuda", 90, 32),
    options={"num_warps": ..., "num_stages": ...})."""
    from triton.compiler import ASTSource
    types = signature(kernel, dtype, constexprs)
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(kernel.arg_names)
               if types[name].startswith("*") or name in ("DK", "DV")}
    return ASTSource(fn=kernel, signature=types, constexprs=constexprs, attrs=aligned)


# ---- checks -------------------------------------------------------------------------------------------------

def _fail(message):
    raise ValueError("fem_softmax_read (triton): " + message)


def _check(q, k, v, beta, cap, key_mask, cu_seqlens):
    for name, x in (("q", q), ("k", k), ("v", v), ("beta", beta)):
        if not isinstance(x, torch.Tensor):
            _fail(f"{name} must be a tensor (got {type(x).__name__})")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != 4:
            _fail(f"{name} must be 4-d, [B,T,H,d] (got {list(x.shape)})")
    if q.dtype not in DTYPES:
        _fail(f"q must be float32, float16 or bfloat16 (got {q.dtype})")
    for name, x in (("k", k), ("v", v), ("beta", beta)):
        if x.dtype != q.dtype:
            _fail(f"{name} must have q's dtype {q.dtype} (got {x.dtype})")
    for name, x in (("k", k), ("v", v), ("beta", beta), ("key_mask", key_mask), ("cu_seqlens", cu_seqlens)):
        if x is not None and x.device != q.device:
            _fail(f"{name} must be on q's device {q.device} (got {x.device})")
    B, T, H, dk = q.shape
    S, dv = k.shape[1], v.shape[3]
    if tuple(k.shape) != (B, S, H, dk):
        _fail(f"k must be [B,S,H,dk] = [{B},S,{H},{dk}] like q (got {list(k.shape)})")
    if tuple(v.shape[:3]) != (B, S, H):
        _fail(f"v must be [B,S,H,dv] = [{B},{S},{H},dv] like k (got {list(v.shape)})")
    if dk not in HEAD_WIDTHS:
        _fail(f"the key width dk must be a multiple of 16 from 16 to 128 (got {dk})")
    if dv not in HEAD_WIDTHS:
        _fail(f"the value width dv must be a multiple of 16 from 16 to 128 (got {dv})")
    if beta.numel() != H * dv:
        _fail(f"beta must have H*dv = {H * dv} entries (got {beta.numel()})")
    if not 0 < cap <= SHIFT_SPAN:
        _fail(f"cap must be in (0, {SHIFT_SPAN:g}] (got {cap}); impl='naive' reads any cap")
    if T > S:
        _fail(f"needs at most as many queries as keys (got T = {T}, S = {S})")
    if key_mask is not None and (key_mask.dtype != torch.bool or tuple(key_mask.shape) != (B, S)):
        _fail(f"key_mask must be bool [B,S] = [{B},{S}] (got {key_mask.dtype} {list(key_mask.shape)})")
    if cu_seqlens is not None:
        if key_mask is not None:
            _fail("give cu_seqlens or key_mask, not both (a packed batch has no padding)")
        if cu_seqlens.dtype != torch.int64 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
            _fail(f"cu_seqlens must be int64 [N+1] (got {cu_seqlens.dtype} {list(cu_seqlens.shape)})")
        if B != 1 or T != S:
            _fail(f"packed sequences (cu_seqlens) take q, k, v [1, total_T, H, d] with T == S (got B = {B}, "
                  f"T = {T}, S = {S})")
        cu = cu_seqlens.tolist()
        if cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])):
            _fail(f"cu_seqlens must rise from 0 to the packed length {T} (got {cu})")


# ---- the autograd entry -------------------------------------------------------------------------------------

def _launch(kernel, geometry, *args):
    grid, constexprs, num_warps, num_stages = geometry
    if grid[0] == 0 or grid[1] == 0:
        return
    kernel[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages)


class FemSoftmaxReadTriton(torch.autograd.Function):
    """(mean, free_energy) of fem_softmax_read from the Triton kernels; gradients for q, k, v and beta."""

    @staticmethod
    def forward(ctx, q, k, v, beta, cap, causal, scale, key_mask, cu_seqlens, blocks):
        B, T, H, dk = q.shape
        S, dv = k.shape[1], v.shape[3]
        beta_shape = beta.shape
        q, k, v, beta = q.contiguous(), k.contiguous(), v.contiguous(), beta.contiguous().reshape(-1)
        dev = q.device
        if cu_seqlens is not None:
            cu_q = cu_k = cu_seqlens.contiguous()
            lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
            max_t = max_s = max(lengths, default=0)
        else:
            cu_q = torch.arange(B + 1, device=dev, dtype=torch.int64) * T
            cu_k = torch.arange(B + 1, device=dev, dtype=torch.int64) * S
            max_t, max_s = T, S
        n_seq = cu_q.numel() - 1
        if key_mask is not None:
            mask = key_mask.contiguous().view(torch.int8)
            first_real = torch.where(key_mask.any(1), key_mask.to(torch.int8).argmax(1), S).to(torch.int32)
        else:
            mask = torch.ones(1, device=dev, dtype=torch.int8)  # never read (has_mask = 0)
            first_real = torch.zeros(1, device=dev, dtype=torch.int32)
        mean = torch.empty(B, T, H, dv, device=dev, dtype=torch.float32)
        free = torch.empty_like(mean)
        lse = torch.empty(B, T, H, device=dev, dtype=torch.float32)
        bm, bn = blocks
        _launch(fem_softmax_read_fwd_kernel, fwd_launch(dk, dv, q.dtype, max_t, n_seq * H, bm, bn),
                q, k, v, beta, mask, first_real, cu_q, cu_k, mean, free, lse, H, dk, dv, float(scale), float(cap),
                int(causal), int(key_mask is not None))
        ctx.save_for_backward(q, k, v, beta, mask, first_real, cu_q, cu_k, mean, free, lse)
        ctx.args = (cap, causal, scale, key_mask is not None, max_t, max_s, blocks, beta_shape)
        return mean.to(q.dtype), free.to(q.dtype)

    @staticmethod
    def backward(ctx, d_mean, d_free):
        q, k, v, beta, mask, first_real, cu_q, cu_k, mean, free, lse = ctx.saved_tensors
        cap, causal, scale, has_mask, max_t, max_s, blocks, beta_shape = ctx.args
        B, T, H, dk = q.shape
        dv = v.shape[3]
        n_seq = cu_q.numel() - 1
        # The elementwise prologue (README.md): L = beta F, dL = dF / beta, G = dL exp(cap - L) (clamped where no
        # key is seen, whose P is 0), Delta = d_mean . mean + sum_j dL_j, and F = L / beta's own beta term.
        b = beta.float().view(H, dv)
        d_free = d_free.float()
        d_log = d_free / b
        g = (d_log * torch.exp(torch.clamp(cap - b * free, max=2 * cap))).contiguous()
        delta = (d_mean.float() * mean + d_log).sum(-1).contiguous()
        d_mean = d_mean.to(q.dtype).contiguous()
        dq = torch.empty(B, T, H, dk, device=q.device, dtype=torch.float32)
        dk_ = torch.empty(B, k.shape[1], H, dk, device=q.device, dtype=torch.float32)
        dv_ = torch.empty(B, k.shape[1], H, dv, device=q.device, dtype=torch.float32)
        dbeta_terms = torch.empty_like(dv_)
        bm, bn = blocks
        common = (q, k, v, beta, mask, first_real, cu_q, cu_k, d_mean, g, lse, delta)
        flags = (H, dk, dv, float(scale), float(cap), int(causal), int(has_mask))
        _launch(fem_softmax_read_bwd_dkdv_kernel, bwd_dkdv_launch(dk, dv, q.dtype, max_s, n_seq * H, bm, bn),
                *common, dk_, dv_, dbeta_terms, *flags)
        _launch(fem_softmax_read_bwd_dq_kernel, bwd_dq_launch(dk, dv, q.dtype, max_t, n_seq * H, bm, bn),
                *common, dq, *flags)
        dbeta = dbeta_terms.sum((0, 1)) - (d_free * free / b).sum((0, 1))
        return (dq.to(q.dtype), dk_.to(k.dtype), dv_.to(v.dtype), dbeta.reshape(beta_shape).to(beta.dtype),
                None, None, None, None, None, None)


def fem_softmax_read(q, k, v, beta, cap=40.0, causal=True, scale=None, key_mask=None, cu_seqlens=None,
                     block_m=None, block_n=None):
    """fem_softmax_read's (mean, free_energy) through the Triton kernels: q [B,T,H,dk], k [B,S,H,dk],
    v [B,S,H,dv], beta [H*dv] or [H,dv] (> 0), key_mask bool [B,S], cu_seqlens int64 [N+1] (B = 1, T == S).
    block_m/block_n replace the GPU block sizes (powers of two >= 16; the interpreter tests use 16)."""
    _check(q, k, v, beta, cap, key_mask, cu_seqlens)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return FemSoftmaxReadTriton.apply(q, k, v, beta, float(cap), bool(causal), float(scale), key_mask, cu_seqlens,
                                      (block_m, block_n))
