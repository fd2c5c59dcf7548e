"""The chunked scan of gated linear attention in Triton (and of linear attention: the same scan without decay):
forward and backward kernels (README.md, "The Triton kernels"), and thin torch.autograd.Functions that join them
so Python calls them like the ops `gla` and `linear_attention`.

    S_t = diag(e^{a_t}) S_{t-1} + k_t v_t^T,   z_t = e^{a_t} * z_{t-1} + k_t,
    numerator_t = (scale q_t) S_t,            normaliser_t = (scale q_t) . z_t,

with a log decay a <= 0 per head [B,T,H] or per key feature [B,T,H,dk] (none for linear attention), an initial
state (S_0, z_0) and the final state, and packed sequences (cu_seqlens, B = 1), each scanned from its own state.

The kernels are written for Triton's interpreter as much as for a GPU (TRITON_INTERPRET=1 runs them on CPU
tensors): no autotuning, plain constexpr block sizes, nothing called on program_id's result. Every launch's
geometry (grid, constexprs, warps) comes from one function per kernel (`*_launch`), which the C++ launcher of the
ahead-of-time compiled cubins mirrors; the argument lists are documented above each kernel, in order.

Layout conventions shared by all kernels (C++ passes exactly these):
* q, k [rows, H, DK], v [rows, H, DV], a per-key decay [rows, H, DK], a per-head decay [rows, H], and every
  gradient are contiguous; rows = B*T (unpacked) or total_T (packed); element (row, h, d) at (row * H + h) * D + d,
  offsets computed in int64.
* Sequence n is rows cu[n] .. cu[n+1] (int64 [N+1]): unpacked batches pass cu = T * arange(B+1), packed ones
  cu_seqlens. States are float32, kv [N, H, DK, DV] and k_sum [N, H, DK].
* Pointers are 16-byte aligned (the cubins are compiled with that divisibility hint, as Triton's JIT specialises
  them); every kernel takes two more pointer arguments after the listed ones, which Triton appends (global and
  profile scratch): pass null, the kernels use none.
"""
import torch
import triton
import triton.language as tl

# Under TRITON_INTERPRET=1, tl.dot on bfloat16 operands multiplies the bit patterns (triton issue 11584), while
# bfloat16 loads, stores and casts are right. The interpreter tests set this to tl.constexpr(True) so that every
# product casts its operands to float32 first; compiled kernels never do (it stays False in every cubin).
INTERPRETER_DOT_IN_FP32 = tl.constexpr(False)

# Head widths dk, dv (any pair): multiples of 16 up to 128; the key width is held in a block of 64 or 128
# (KEY_BLOCKS), the value width is cut into blocks of 64 columns. The input dtypes float32, float16, bfloat16. The
# cubins assume 16-byte aligned pointers and widths divisible by 16 (the specialisation Triton's JIT makes).
HEAD_WIDTHS = tuple(range(16, 129, 16))
KEY_BLOCKS = (64, 128)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _dot(a, b, EXACT: tl.constexpr):
    """a @ b with a float32 result. EXACT (float32 inputs): float32 products to float32 accuracy (tf32x3);
    otherwise 16-bit operands on tensor cores, or float32 operands through tf32 (float16's 10 mantissa bits,
    float32's range: the state and its gradient exceed float16's)."""
    if INTERPRETER_DOT_IN_FP32:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif EXACT:
        c = tl.dot(a, b, input_precision="tf32x3")
    else:
        c = tl.dot(a, b, input_precision="tf32")
    return c


@triton.jit
def _mixed_dot(x, y, HALF: tl.constexpr, EXACT: tl.constexpr):
    """x @ y where x is a block the kernel computed (probabilities, weights, their gradients) and y a block of
    inputs, float32 result. HALF (float16 inputs): both as float16, x keeping 11 bits as FlashAttention's P does.
    Otherwise both as float32: on bfloat16 inputs through tf32, since x rounded to bfloat16's 8 bits would double the
    error of the result against its own final rounding (y widens exactly); on float32 inputs tf32x3."""
    if HALF:
        r = _dot(x.to(tl.float16), y.to(tl.float16), EXACT)
    else:
        r = _dot(x.to(tl.float32), y.to(tl.float32), EXACT)
    return r


@triton.jit
def _row(x, sel):
    """Row j of x [BT, W] as [W], sel = (arange(BT) == j)."""
    return tl.sum(tl.where(sel[:, None], x, 0.0), 0)


@triton.jit
def _col(x, sel):
    """Column j of x [BT, BT] as [BT], sel = (arange(BT) == j)."""
    return tl.sum(tl.where(sel[None, :], x, 0.0), 1)


@triton.jit
def _decay_from(c, c_j, offs, j):
    """exp(c_t - c_j) per feature for rows t >= j, else 0: [BT, BK]; every evaluated exponent is <= 0."""
    return tl.exp(tl.where((offs >= j)[:, None], c - c_j[None, :], float("-inf")))


@triton.jit
def _intra_per_key(b_q, b_k, b_c, BT: tl.constexpr):
    """A_tj = sum_f q_tf k_jf exp(c_tf - c_jf) for j <= t (float32 [BT, BT]), one key column at a time so that
    every exponent stays <= 0 (a per-feature decay has no shared mask to factor out of a block product)."""
    offs = tl.arange(0, BT)
    a = tl.zeros([BT, BT], tl.float32)
    for j in range(BT):
        sel = offs == j
        w = _decay_from(b_c, _row(b_c, sel), offs, j)
        a += tl.where(sel[None, :], tl.sum(b_q * _row(b_k, sel)[None, :] * w, 1)[:, None], 0.0)
    return a


@triton.jit
def _dq_intra_per_key(d_a, b_k, b_c, BT: tl.constexpr):
    """sum_{j <= t} dA_tj k_j * exp(c_t - c_j) (float32 [BT, BK])."""
    offs = tl.arange(0, BT)
    dq = tl.zeros(b_k.shape, tl.float32)
    for j in range(BT):
        sel = offs == j
        w = _decay_from(b_c, _row(b_c, sel), offs, j)
        dq += _col(d_a, sel)[:, None] * _row(b_k, sel)[None, :] * w
    return dq


@triton.jit
def _bwd_intra_per_key(b_q, b_k, b_c, d_a, BT: tl.constexpr):
    """(A, dk_intra): A as _intra_per_key and dk_j = sum_{t >= j} dA_tj q_t * exp(c_t - c_j)."""
    offs = tl.arange(0, BT)
    a = tl.zeros([BT, BT], tl.float32)
    dk = tl.zeros(b_k.shape, tl.float32)
    for j in range(BT):
        sel = offs == j
        w = _decay_from(b_c, _row(b_c, sel), offs, j)
        a += tl.where(sel[None, :], tl.sum(b_q * _row(b_k, sel)[None, :] * w, 1)[:, None], 0.0)
        dk += tl.where(sel[:, None], tl.sum(_col(d_a, sel)[:, None] * b_q * w, 0)[None, :], 0.0)
    return a, dk


@triton.jit
def _chunk(q, k, v, g_decay, rows, t_ok, g_ok, offs_k, k_ok, offs_v, v_ok, DK, DV, PER_KEY: tl.constexpr):
    """One chunk's inputs and decay factors (rows where t_ok, a per-head decay where g_ok, zeros elsewhere):
    q, k [BT, BK] and v [BT, BV] as stored, the local log cumsum c from the chunk's start through t (per head
    [BT, 1], per key [BT, BK]), exp(c), exp(c_last - c) and exp(c_last) ([1, 1] or [1, BK])."""
    qk_ok = t_ok[:, None] & k_ok[None, :]
    b_q = tl.load(q + rows[:, None] * DK + offs_k[None, :], mask=qk_ok, other=0.0)
    b_k = tl.load(k + rows[:, None] * DK + offs_k[None, :], mask=qk_ok, other=0.0)
    b_v = tl.load(v + rows[:, None] * DV + offs_v[None, :], mask=t_ok[:, None] & v_ok[None, :], other=0.0)
    if PER_KEY:
        b_g = tl.load(g_decay + rows[:, None] * DK + offs_k[None, :], mask=qk_ok, other=0.0).to(tl.float32)
        b_c = tl.cumsum(b_g, 0)
        c_last = tl.sum(b_g, 0)[None, :]
    else:
        b_g = tl.load(g_decay + rows, mask=g_ok, other=0.0).to(tl.float32)
        b_c = tl.cumsum(b_g, 0)[:, None]
        c_last = tl.sum(b_g[:, None], 0)[None, :]
    return b_q, b_k, b_v, b_c, tl.exp(b_c), tl.exp(c_last - b_c), tl.exp(c_last)


@triton.jit
def _intra(b_q, b_k, b_c, offs_t, EXACT: tl.constexpr, BT: tl.constexpr, PER_KEY: tl.constexpr):
    """A_ti = (q_t . k_i) exp(c_t - c_i) for i <= t (per key: summed over features), float32 [BT, BT]."""
    if PER_KEY:
        a = _intra_per_key(b_q.to(tl.float32), b_k.to(tl.float32), b_c, BT)
    else:
        a = _dot(b_q, tl.trans(b_k), EXACT) * _causal_decay(b_c, offs_t)
    return a


@triton.jit
def _causal_decay(b_c, offs_t):
    """M_ti = exp(c_t - c_i) for i <= t, else 0 ([BT, BT] from the per-head c [BT, 1]); masked before exp."""
    diff = b_c - tl.reshape(b_c, [1, b_c.shape[0]])
    return tl.exp(tl.where(offs_t[:, None] >= offs_t[None, :], diff, float("-inf")))


# ---- forward ------------------------------------------------------------------------------------------------
# chunk_gla_fwd_kernel arguments, in order:
#   q, k        *dtype [rows, H, DK]
#   v           *dtype [rows, H, DV]
#   g_decay     *dtype [rows, H] (PER_KEY = False; read when has_decay) or [rows, H, DK] (PER_KEY = True)
#   h0          *fp32  [N, H, DK, DV]  initial kv (read when use_initial)
#   z0          *fp32  [N, H, DK]      initial k_sum (read when use_initial)
#   num         *fp32  [rows, H, DV]   out: numerator
#   den         *fp32  [rows, H]       out: normaliser
#   ht          *fp32  [N, H, DK, DV]  out: final kv (written when store_final)
#   zt          *fp32  [N, H, DK]      out: final k_sum (written when store_final)
#   cu          *i64   [N+1]           sequence offsets
#   H, DK, DV   i32    heads and head widths (DK, DV multiples of 16, DK <= BK)
#   scale fp32, has_decay i32, use_initial i32, store_final i32
#   constexprs: BT (chunk length), BK (the key width's block: the whole key width), BV (value columns per
#               program), PER_KEY (decay per key feature), EXACT (float32 inputs)
# grid: (cdiv(DV, BV), N * H). The normaliser and z belong to the programs of the first value block.
@triton.jit
def chunk_gla_fwd_kernel(q, k, v, g_decay, h0, z0, num, den, ht, zt, cu, H, DK, DV, scale, has_decay, use_initial,
                         store_final, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PER_KEY: tl.constexpr,
                         EXACT: tl.constexpr):
    HALF: tl.constexpr = q.dtype.element_ty == tl.float16
    i_v = tl.program_id(0)
    i_nh = tl.program_id(1)
    n = i_nh // H
    h = i_nh % H
    bos = tl.load(cu + n)
    T_n = (tl.load(cu + n + 1) - bos).to(tl.int32)
    first = (i_v == 0).to(tl.int32)  # the normaliser and z belong to the first value block's programs
    T_den = T_n * first
    K_z = DK * first  # z's features, stored by the first value block only
    T_decay = T_n * has_decay  # positions whose per-head decay is read (none for linear attention)
    offs_t0 = tl.arange(0, BT)
    offs_k = tl.arange(0, BK)
    k_ok = offs_k < DK
    offs_v = i_v * BV + tl.arange(0, BV)
    v_ok = offs_v < DV
    hv_ok = k_ok[:, None] & v_ok[None, :]
    state = (n * H + h).to(tl.int64) * DK
    h_ptrs = (state + offs_k[:, None]) * DV + offs_v[None, :]
    b_h = tl.zeros([BK, BV], tl.float32)
    b_z = tl.zeros([BK], tl.float32)
    if use_initial != 0:
        b_h = tl.load(h0 + h_ptrs, mask=hv_ok, other=0.0)
        b_z = tl.load(z0 + state + offs_k, mask=k_ok, other=0.0)
    for t0 in range(0, T_n, BT):
        offs_t = t0 + offs_t0
        t_ok = offs_t < T_n
        rows = (bos + offs_t).to(tl.int64) * H + h
        b_q, b_k, b_v, b_c, q_dec, k_dec, decay = _chunk(q, k, v, g_decay, rows, t_ok, offs_t < T_decay, offs_k, k_ok,
                                                         offs_v, v_ok, DK, DV, PER_KEY)
        a = _intra(b_q, b_k, b_c, offs_t0, EXACT, BT, PER_KEY) * scale
        qg = b_q.to(tl.float32) * q_dec * scale
        kg = b_k.to(tl.float32) * k_dec
        b_o = _dot(qg, b_h, EXACT) + _mixed_dot(a, b_v, HALF, EXACT)
        tl.store(num + rows[:, None] * DV + offs_v[None, :], b_o, mask=t_ok[:, None] & v_ok[None, :])
        tl.store(den + rows, tl.sum(qg * b_z[None, :], 1) + tl.sum(a, 1), mask=offs_t < T_den)
        b_h = b_h * tl.reshape(decay, [decay.shape[1], 1]) + _dot(tl.trans(kg), b_v.to(tl.float32), EXACT)
        b_z = b_z * tl.reshape(decay, [decay.shape[1]]) + tl.sum(kg, 0)
    if store_final != 0:
        tl.store(ht + h_ptrs, b_h, mask=hv_ok)
        tl.store(zt + state + offs_k, b_z, mask=offs_k < K_z)


# ---- backward -----------------------------------------------------------------------------------------------
# chunk_gla_bwd_kernel arguments, in order:
#   q, k, v, g_decay, h0, z0           as the forward
#   d_num       *dtype [rows, H, DV]   the gradient of the numerator
#   d_den       *dtype [rows, H]       the gradient of the normaliser
#   dht         *fp32  [N, H, DK, DV]  the gradient of the final kv (read when has_final_grad)
#   dzt         *fp32  [N, H, DK]      the gradient of the final k_sum (read when has_final_grad)
#   dq          *fp32  [NV, rows, H, DK]  out: per value block, its part of dq (summed by the caller)
#   dk          *fp32  [NV, rows, H, DK]  out: per value block, its part of dk
#   dv          *fp32  [rows, H, DV]      out
#   dh0         *fp32  [N, H, DK, DV]     out: the gradient of the initial kv (written when use_initial)
#   dz0         *fp32  [N, H, DK]         out: the gradient of the initial k_sum (written when use_initial)
#   dg_final    *fp32  [NV, N, H, DK]     out: per value block, sum_v dS_T * S_T per feature (the final state's
#                                         share of the decay gradient, added at each sequence's last position)
#   cu          *i64   [N+1]
#   H, DK, DV i32, n_rows i32 (rows), scale fp32, has_decay i32, use_initial i32, has_final_grad i32
#   constexprs: as the forward
# grid: (NV = cdiv(DV, BV), N * H).
@triton.jit
def chunk_gla_bwd_kernel(q, k, v, g_decay, h0, z0, d_num, d_den, dht, dzt, dq, dk, dv, dh0, dz0, dg_final, cu, H,
                         DK, DV, n_rows, scale, has_decay, use_initial, has_final_grad, BT: tl.constexpr,
                         BK: tl.constexpr, BV: tl.constexpr, PER_KEY: tl.constexpr, EXACT: tl.constexpr):
    HALF: tl.constexpr = q.dtype.element_ty == tl.float16
    i_v = tl.program_id(0)
    i_nh = tl.program_id(1)
    n = i_nh // H
    h = i_nh % H
    bos = tl.load(cu + n)
    T_n = (tl.load(cu + n + 1) - bos).to(tl.int32)
    first = (i_v == 0).to(tl.int32)  # the normaliser and z belong to the first value block's programs
    T_den = T_n * first
    K_z = DK * first  # z's features, stored by the first value block only
    T_decay = T_n * has_decay  # positions whose per-head decay is read (none for linear attention)
    offs_t0 = tl.arange(0, BT)
    offs_k = tl.arange(0, BK)
    k_ok = offs_k < DK
    offs_v = i_v * BV + tl.arange(0, BV)
    v_ok = offs_v < DV
    hv_ok = k_ok[:, None] & v_ok[None, :]
    state = (n * H + h).to(tl.int64) * DK
    h_ptrs = (state + offs_k[:, None]) * DV + offs_v[None, :]
    part = i_v.to(tl.int64) * n_rows * H * DK  # this value block's slice of dq and dk

    # Pass 1, forward over the chunks: the states again and dq_t = sum_{i<=t} D_ti k_i + (entry state) G_t.
    b_h = tl.zeros([BK, BV], tl.float32)
    b_z = tl.zeros([BK], tl.float32)
    if use_initial != 0:
        b_h = tl.load(h0 + h_ptrs, mask=hv_ok, other=0.0)
        b_z = tl.load(z0 + state + offs_k, mask=k_ok, other=0.0)
    for t0 in range(0, T_n, BT):
        offs_t = t0 + offs_t0
        t_ok = offs_t < T_n
        rows = (bos + offs_t).to(tl.int64) * H + h
        b_q, b_k, b_v, b_c, q_dec, k_dec, decay = _chunk(q, k, v, g_decay, rows, t_ok, offs_t < T_decay, offs_k, k_ok,
                                                         offs_v, v_ok, DK, DV, PER_KEY)
        b_do = tl.load(d_num + rows[:, None] * DV + offs_v[None, :], mask=t_ok[:, None] & v_ok[None, :], other=0.0)
        b_dd = tl.load(d_den + rows, mask=offs_t < T_den, other=0.0).to(tl.float32)
        # dA_ti = g_num_t . v_i + g_den_t: the gradient w.r.t. the intra-chunk weight of key i at t.
        d_a = _dot(b_do, tl.trans(b_v.to(b_do.dtype)), EXACT) + b_dd[:, None]
        if PER_KEY:
            dq_intra = _dq_intra_per_key(d_a, b_k.to(tl.float32), b_c, BT)
        else:
            dq_intra = _mixed_dot(d_a * _causal_decay(b_c, offs_t0), b_k, HALF, EXACT)
        dq_state = (_dot(b_do.to(tl.float32), tl.trans(b_h), EXACT) + b_dd[:, None] * b_z[None, :]) * q_dec
        tl.store(dq + part + rows[:, None] * DK + offs_k[None, :], (dq_intra + dq_state) * scale,
                 mask=t_ok[:, None] & k_ok[None, :])
        kg = b_k.to(tl.float32) * k_dec
        b_h = b_h * tl.reshape(decay, [decay.shape[1], 1]) + _dot(tl.trans(kg), b_v.to(tl.float32), EXACT)
        b_z = b_z * tl.reshape(decay, [decay.shape[1]]) + tl.sum(kg, 0)

    # Pass 2, backward over the chunks, carrying dS (the gradient w.r.t. the state leaving the chunk).
    b_dh = tl.zeros([BK, BV], tl.float32)
    b_dz = tl.zeros([BK], tl.float32)
    if has_final_grad != 0:
        b_dh = tl.load(dht + h_ptrs, mask=hv_ok, other=0.0)
        b_dz = tl.load(dzt + state + offs_k, mask=offs_k < K_z, other=0.0)
    # The final state S_T depends on c_T (the last position's log decay from each key) with dS_T/dc_T = S_T.
    tl.store(dg_final + i_v.to(tl.int64) * tl.num_programs(1) * DK + state + offs_k,
             tl.sum(b_dh * b_h, 1) + b_dz * b_z, mask=k_ok)
    n_chunks = tl.cdiv(T_n, BT)
    for i in range(0, n_chunks):
        t0 = (n_chunks - 1 - i) * BT
        offs_t = t0 + offs_t0
        t_ok = offs_t < T_n
        rows = (bos + offs_t).to(tl.int64) * H + h
        b_q, b_k, b_v, b_c, q_dec, k_dec, decay = _chunk(q, k, v, g_decay, rows, t_ok, offs_t < T_decay, offs_k, k_ok,
                                                         offs_v, v_ok, DK, DV, PER_KEY)
        b_do = tl.load(d_num + rows[:, None] * DV + offs_v[None, :], mask=t_ok[:, None] & v_ok[None, :], other=0.0)
        b_dd = tl.load(d_den + rows, mask=offs_t < T_den, other=0.0).to(tl.float32)
        d_a = _dot(b_do, tl.trans(b_v.to(b_do.dtype)), EXACT) + b_dd[:, None]
        if PER_KEY:
            a, dk_intra = _bwd_intra_per_key(b_q.to(tl.float32), b_k.to(tl.float32), b_c, d_a, BT)
        else:
            m = _causal_decay(b_c, offs_t0)
            a = _dot(b_q, tl.trans(b_k), EXACT) * m
            dk_intra = _mixed_dot(tl.trans(d_a * m), b_q, HALF, EXACT)
        a = a * scale
        kg = b_k.to(tl.float32) * k_dec
        qg = b_q.to(tl.float32) * q_dec * scale
        b_dk = dk_intra * scale + k_dec * (_dot(b_v.to(tl.float32), tl.trans(b_dh), EXACT) + b_dz[None, :])
        b_dv = _mixed_dot(tl.trans(a), b_do, HALF, EXACT) + _dot(kg, b_dh, EXACT)
        tl.store(dk + part + rows[:, None] * DK + offs_k[None, :], b_dk, mask=t_ok[:, None] & k_ok[None, :])
        tl.store(dv + rows[:, None] * DV + offs_v[None, :], b_dv, mask=t_ok[:, None] & v_ok[None, :])
        b_dh = b_dh * tl.reshape(decay, [decay.shape[1], 1]) + _dot(tl.trans(qg), b_do.to(tl.float32), EXACT)
        b_dz = b_dz * tl.reshape(decay, [decay.shape[1]]) + tl.sum(qg * b_dd[:, None], 0)
    if use_initial != 0:
        tl.store(dh0 + h_ptrs, b_dh, mask=hv_ok)
        tl.store(dz0 + state + offs_k, b_dz, mask=offs_k < K_z)


# chunk_gla_bwd_decay_kernel arguments, in order:
#   q, k        *dtype [rows, H, DK]
#   dq, dk      *fp32  [rows, H, DK]   the full gradients of q and k (summed over value blocks)
#   dg_final    *fp32  [N, H, DK]      summed over value blocks
#   dg          *fp32  [rows, H] (per head) or [rows, H, DK] (per key)   out: the gradient of the log decay
#   cu          *i64   [N+1]
#   H, DK i32
#   constexprs: BT (positions per step), BK (DK's block), PER_KEY
# grid: (N * H,). d a_r = sum_{t >= r} (q_t * dq_t - k_t * dk_t) (+ dg_final at the sequence's last position),
# summed over features per head: the suffix sum over each sequence, carried across chunks.
@triton.jit
def chunk_gla_bwd_decay_kernel(q, k, dq, dk, dg_final, dg, cu, H, DK, BT: tl.constexpr, BK: tl.constexpr,
                               PER_KEY: tl.constexpr):
    i_nh = tl.program_id(0)
    n = i_nh // H
    h = i_nh % H
    bos = tl.load(cu + n)
    T_n = (tl.load(cu + n + 1) - bos).to(tl.int32)
    offs_t0 = tl.arange(0, BT)
    offs_k = tl.arange(0, BK)
    k_ok = offs_k < DK
    b_final = tl.load(dg_final + (n * H + h).to(tl.int64) * DK + offs_k, mask=k_ok, other=0.0)
    if PER_KEY:
        carry = tl.zeros([BK], tl.float32)
    else:
        carry = tl.zeros([1], tl.float32)
    n_chunks = tl.cdiv(T_n, BT)
    for i in range(0, n_chunks):
        offs_t = (n_chunks - 1 - i) * BT + offs_t0
        t_ok = offs_t < T_n
        rows = (bos + offs_t).to(tl.int64) * H + h
        at = rows[:, None] * DK + offs_k[None, :]
        ok = t_ok[:, None] & k_ok[None, :]
        b_q = tl.load(q + at, mask=ok, other=0.0).to(tl.float32)
        b_k = tl.load(k + at, mask=ok, other=0.0).to(tl.float32)
        b_dq = tl.load(dq + at, mask=ok, other=0.0)
        b_dk = tl.load(dk + at, mask=ok, other=0.0)
        b_dc = b_q * b_dq - b_k * b_dk + tl.where((offs_t == T_n - 1)[:, None], b_final[None, :], 0.0)
        if PER_KEY:
            tl.store(dg + at, tl.cumsum(b_dc, 0, reverse=True) + carry[None, :], mask=ok)
            carry += tl.sum(b_dc, 0)
        else:
            b_dc_h = tl.sum(b_dc, 1)
            tl.store(dg + rows, tl.cumsum(b_dc_h, 0, reverse=True) + carry, mask=t_ok)
            carry += tl.sum(b_dc_h, 0)


# ---- launch geometry (mirrored by the C++ launcher) ---------------------------------------------------------

def key_block(dk):
    """The compiled block that holds the key width dk (a multiple of 16 up to 128): 64 or 128."""
    return 64 if dk <= 64 else 128


# GPU sizes (BT positions per chunk, BV value columns per program, num_warps) by kernel, input dtype, key block,
# decay per key, and architecture (80: sm_80 up to sm_89; 90: sm_90 and later): per architecture, the largest tried
# that compiles without spills, else the one that spills least (python/tests/test_triton.py's ALLOWED_STACK lists
# those; float32 products run as tf32x3, three times the operand registers of a 16-bit product). Chunks are 16
# positions: the per-key weights are built one key column at a time, and the per-head kernel spills at 32.
def _sizes():
    sizes = {}
    table = {  # (which, dtype, key block, per_key): (sm_80, sm_90) as (BV, num_warps); BT = 16 throughout
        ("fwd", torch.float16, 64, False): ((64, 8), (64, 8)), ("fwd", torch.float16, 64, True): ((64, 8), (64, 8)),
        ("fwd", torch.float16, 128, False): ((32, 8), (64, 8)), ("fwd", torch.float16, 128, True): ((32, 8), (64, 8)),
        ("fwd", torch.bfloat16, 64, False): ((64, 8), (64, 8)), ("fwd", torch.bfloat16, 64, True): ((64, 8), (64, 8)),
        ("fwd", torch.bfloat16, 128, False): ((32, 8), (64, 8)), ("fwd", torch.bfloat16, 128, True): ((32, 8), (64, 8)),
        ("fwd", torch.float32, 64, False): ((16, 8), (64, 8)), ("fwd", torch.float32, 64, True): ((16, 8), (64, 8)),
        ("fwd", torch.float32, 128, False): ((16, 8), (32, 8)), ("fwd", torch.float32, 128, True): ((16, 8), (32, 8)),
        ("bwd", torch.float16, 64, False): ((16, 8), (64, 8)), ("bwd", torch.float16, 64, True): ((16, 8), (64, 8)),
        ("bwd", torch.float16, 128, False): ((16, 8), (32, 8)), ("bwd", torch.float16, 128, True): ((16, 8), (32, 8)),
        ("bwd", torch.bfloat16, 64, False): ((16, 8), (64, 8)), ("bwd", torch.bfloat16, 64, True): ((16, 8), (64, 8)),
        ("bwd", torch.bfloat16, 128, False): ((16, 8), (32, 8)), ("bwd", torch.bfloat16, 128, True): ((16, 8), (32, 8)),
        ("bwd", torch.float32, 64, False): ((16, 8), (32, 8)), ("bwd", torch.float32, 64, True): ((16, 8), (64, 8)),
        ("bwd", torch.float32, 128, False): ((16, 8), (32, 8)), ("bwd", torch.float32, 128, True): ((16, 8), (32, 8)),
    }
    for key, per_arch in table.items():
        for arch, (bv, num_warps) in zip(ARCHS, per_arch):
            sizes[key + (arch,)] = (16, bv, num_warps)
    return sizes


ARCHS = (80, 90)
GPU_SIZES = _sizes()


def arch_of(device):
    """The table's architecture for a device: 90 for sm_90 and later, 80 below (the interpreter: 90)."""
    if device.type != "cuda":
        return 90
    major, minor = torch.cuda.get_device_capability(device)
    return 90 if major * 10 + minor >= 90 else 80


def _geometry(which, dk, dv, dtype, per_key, n_heads_total, chunk, block_v, arch):
    bt, bv, num_warps = GPU_SIZES[(which, dtype, key_block(dk), bool(per_key), arch)]
    bt, bv = chunk or bt, block_v or bv
    constexprs = {"BT": bt, "BK": key_block(dk), "BV": bv, "PER_KEY": per_key, "EXACT": dtype == torch.float32}
    return (triton.cdiv(dv, bv), n_heads_total), constexprs, num_warps, 1


def fwd_launch(dk, dv, dtype, per_key, n_heads_total, chunk=None, block_v=None, arch=90):
    """(grid, constexprs, num_warps, num_stages) of chunk_gla_fwd_kernel on architecture `arch` (80 or 90);
    n_heads_total = N * H. chunk/block_v replace the GPU chunk length and value block (the interpreter tests use
    16)."""
    return _geometry("fwd", dk, dv, dtype, per_key, n_heads_total, chunk, block_v, arch)


def bwd_launch(dk, dv, dtype, per_key, n_heads_total, chunk=None, block_v=None, arch=90):
    """(grid, constexprs, num_warps, num_stages) of chunk_gla_bwd_kernel."""
    return _geometry("bwd", dk, dv, dtype, per_key, n_heads_total, chunk, block_v, arch)


def bwd_decay_launch(dk, per_key, n_heads_total, chunk=None):
    """(grid, constexprs, num_warps, num_stages) of chunk_gla_bwd_decay_kernel."""
    constexprs = {"BT": chunk or 64, "BK": key_block(dk), "PER_KEY": per_key}
    return (n_heads_total,), constexprs, 8, 1


def launch_configs():
    """Every (kernel, input dtype, constexprs, num_warps, num_stages, arch) the launchers use at the GPU sizes:
    the cubins the C++ launcher embeds. Linear attention is the per-head configuration (has_decay = 0)."""
    configs = []
    for arch in ARCHS:
        for dtype in DTYPES:
            for bk in KEY_BLOCKS:
                for per_key in (False, True):
                    for kernel, launch in ((chunk_gla_fwd_kernel, fwd_launch), (chunk_gla_bwd_kernel, bwd_launch)):
                        _, constexprs, num_warps, num_stages = launch(bk, 64, dtype, per_key, 1, arch=arch)
                        configs.append((kernel, dtype, constexprs, num_warps, num_stages, arch))
                    _, constexprs, num_warps, num_stages = bwd_decay_launch(bk, per_key, 1)
                    configs.append((chunk_gla_bwd_decay_kernel, dtype, constexprs, num_warps, num_stages, arch))
    return configs


def signature(kernel, dtype, constexprs):
    """Triton's signature of a kernel for input dtype `dtype` (its runtime arguments are the C++ argument list)."""
    pointer = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}[dtype]
    types = {"q": pointer, "k": pointer, "v": pointer, "g_decay": pointer, "d_num": pointer, "d_den": pointer,
             "cu": "*i64", "H": "i32", "DK": "i32", "DV": "i32", "n_rows": "i32", "scale": "fp32",
             "has_decay": "i32", "use_initial": "i32", "store_final": "i32", "has_final_grad": "i32"}
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

def _check(op, q, k, v, log_decay, initial_state, cu_seqlens):
    def fail(message):
        raise ValueError(f"{op} (triton): {message}")

    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            fail(f"{name} must be a 4-d tensor [B,T,H,d] (got {getattr(x, 'shape', type(x).__name__)})")
    if q.dtype not in DTYPES:
        fail(f"q must be float32, float16 or bfloat16 (got {q.dtype})")
    named = [("k", k), ("v", v), ("log_decay", log_decay)]
    for name, x in named:
        if x is not None and x.dtype != q.dtype:
            fail(f"{name} must have q's dtype {q.dtype} (got {x.dtype})")
    state = [] if initial_state is None else [("initial kv", initial_state[0]), ("initial k_sum", initial_state[1])]
    for name, x in named + state + [("cu_seqlens", cu_seqlens)]:
        if x is not None and x.device != q.device:
            fail(f"{name} must be on q's device {q.device} (got {x.device})")
    B, T, H, dk = q.shape
    dv = v.shape[3]
    if k.shape != q.shape:
        fail(f"k must have q's shape {list(q.shape)} (got {list(k.shape)})")
    if v.shape[:3] != q.shape[:3]:
        fail(f"v must be [B,T,H,dv] = [{B},{T},{H},dv] like q (got {list(v.shape)})")
    if dk not in HEAD_WIDTHS:
        fail(f"the key width dk must be a multiple of 16 from 16 to 128 (got {dk})")
    if dv not in HEAD_WIDTHS:
        fail(f"the value width dv must be a multiple of 16 from 16 to 128 (got {dv})")
    if log_decay is not None and tuple(log_decay.shape) not in ((B, T, H), (B, T, H, dk)):
        fail(f"log_decay must be [B,T,H] = [{B},{T},{H}] or [B,T,H,dk] = [{B},{T},{H},{dk}] (got "
             f"{list(log_decay.shape)})")
    n_seq = B
    if cu_seqlens is not None:
        if cu_seqlens.dtype != torch.int64 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
            fail(f"cu_seqlens must be int64 [N+1] (got {cu_seqlens.dtype} {list(cu_seqlens.shape)})")
        if B != 1:
            fail(f"packed sequences (cu_seqlens) take a batch of 1, [1, total_T, H, d] (got a batch of {B})")
        cu = cu_seqlens.tolist()
        if cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])):
            fail(f"cu_seqlens must rise from 0 to the packed length {T} (got {cu})")
        n_seq = len(cu) - 1
    if initial_state is not None:
        kv, k_sum = initial_state
        if tuple(kv.shape) != (n_seq, H, dk, dv) or tuple(k_sum.shape) != (n_seq, H, dk):
            fail(f"initial_state must be (kv [N,H,dk,dv], k_sum [N,H,dk]) with N = {n_seq} (got "
                 f"{list(kv.shape)} and {list(k_sum.shape)})")
        for name, x in state:
            if x.dtype not in (q.dtype, torch.float32):
                fail(f"{name} must be float32 or q's dtype {q.dtype} (got {x.dtype})")


# ---- the autograd entry -------------------------------------------------------------------------------------

def _launch(kernel, geometry, *args):
    grid, constexprs, num_warps, num_stages = geometry
    if 0 in grid:
        return
    kernel[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages)


class ChunkGlaTriton(torch.autograd.Function):
    """(numerator, normaliser, final kv, final k_sum) of the chunked scan; gradients for q, k, v, the log decay
    and the initial state."""

    @staticmethod
    def forward(ctx, q, k, v, log_decay, kv0, k_sum0, scale, cu_seqlens, sizes):
        ctx.set_materialize_grads(False)
        B, T, H, dk = q.shape
        dv = v.shape[3]
        dev = q.device
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        per_key = log_decay is not None and log_decay.dim() == 4
        g = log_decay.contiguous() if log_decay is not None else torch.zeros(1, device=dev, dtype=q.dtype)
        cu = cu_seqlens.contiguous() if cu_seqlens is not None else \
            torch.arange(B + 1, device=dev, dtype=torch.int64) * T
        n_seq = cu.numel() - 1
        use_initial = kv0 is not None
        h0 = kv0.float().contiguous() if use_initial else torch.zeros(1, device=dev)
        z0 = k_sum0.float().contiguous() if use_initial else torch.zeros(1, device=dev)
        num = torch.empty(B, T, H, dv, device=dev, dtype=torch.float32)
        den = torch.empty(B, T, H, device=dev, dtype=torch.float32)
        ht = torch.empty(n_seq, H, dk, dv, device=dev, dtype=torch.float32)
        zt = torch.empty(n_seq, H, dk, device=dev, dtype=torch.float32)
        chunk, block_v = sizes
        _launch(chunk_gla_fwd_kernel, fwd_launch(dk, dv, q.dtype, per_key, n_seq * H, chunk, block_v, arch_of(dev)),
                q, k, v, g, h0, z0, num, den, ht, zt, cu, H, dk, dv, float(scale), int(log_decay is not None),
                int(use_initial), 1)
        ctx.save_for_backward(q, k, v, g, h0, z0, cu)
        ctx.args = (scale, per_key, log_decay is not None, use_initial, sizes,
                    None if kv0 is None else (kv0.dtype, k_sum0.dtype))
        return num.to(q.dtype), den.to(q.dtype), ht, zt

    @staticmethod
    def backward(ctx, d_num, d_den, d_ht, d_zt):
        q, k, v, g, h0, z0, cu = ctx.saved_tensors
        scale, per_key, has_decay, use_initial, sizes, state_dtypes = ctx.args
        B, T, H, dk = q.shape
        dv = v.shape[3]
        dev = q.device
        n_seq = cu.numel() - 1
        d_num = torch.zeros(B, T, H, dv, device=dev, dtype=q.dtype) if d_num is None else d_num.to(q.dtype)
        d_den = torch.zeros(B, T, H, device=dev, dtype=q.dtype) if d_den is None else d_den.to(q.dtype)
        has_final_grad = d_ht is not None or d_zt is not None
        dht = (torch.zeros(n_seq, H, dk, dv, device=dev) if d_ht is None else d_ht.float()).contiguous()
        dzt = (torch.zeros(n_seq, H, dk, device=dev) if d_zt is None else d_zt.float()).contiguous()
        chunk, block_v = sizes
        geometry = bwd_launch(dk, dv, q.dtype, per_key, n_seq * H, chunk, block_v, arch_of(dev))
        n_v = geometry[0][0]
        dq = torch.empty(n_v, B, T, H, dk, device=dev, dtype=torch.float32)
        dk_ = torch.empty_like(dq)
        dv_ = torch.empty(B, T, H, dv, device=dev, dtype=torch.float32)
        dh0 = torch.empty(n_seq, H, dk, dv, device=dev, dtype=torch.float32)
        dz0 = torch.empty(n_seq, H, dk, device=dev, dtype=torch.float32)
        dg_final = torch.empty(n_v, n_seq, H, dk, device=dev, dtype=torch.float32)
        _launch(chunk_gla_bwd_kernel, geometry, q, k, v, g, h0, z0, d_num.contiguous(), d_den.contiguous(), dht, dzt,
                dq, dk_, dv_, dh0, dz0, dg_final, cu, H, dk, dv, B * T, float(scale), int(has_decay), int(use_initial),
                int(has_final_grad))
        dq, dk_ = dq.sum(0), dk_.sum(0)
        dg = None
        if has_decay:
            dg = torch.empty(g.shape, device=dev, dtype=torch.float32)
            _launch(chunk_gla_bwd_decay_kernel, bwd_decay_launch(dk, per_key, n_seq * H, chunk),
                    q, k, dq, dk_, dg_final.sum(0), dg, cu, H, dk)
            dg = dg.to(g.dtype)
        d_kv0 = d_k_sum0 = None
        if use_initial:
            d_kv0, d_k_sum0 = dh0.to(state_dtypes[0]), dz0.to(state_dtypes[1])
        return dq.to(q.dtype), dk_.to(k.dtype), dv_.to(v.dtype), dg, d_kv0, d_k_sum0, None, None, None


def gla(q, k, v, log_decay, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
        chunk=None, block_v=None):
    """The op `gla` through the Triton kernels: q, k [B,T,H,dk], v [B,T,H,dv], log_decay [B,T,H] or [B,T,H,dk]
    (<= 0), scale multiplies q (default 1), initial_state (kv [N,H,dk,dv], k_sum [N,H,dk]), cu_seqlens int64
    [N+1] (B = 1). Returns (numerator, normaliser) and, with output_final_state, the final (kv, k_sum) in
    float32. chunk/block_v replace the GPU chunk length and value block (powers of two >= 16)."""
    if log_decay is None:
        raise ValueError("gla (triton): log_decay is required ([B,T,H] or [B,T,H,dk]); linear_attention has none")
    return _scan("gla", q, k, v, log_decay, scale, initial_state, output_final_state, cu_seqlens, chunk, block_v)


def linear_attention(q, k, v, causal=True, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, chunk=None, block_v=None):
    """The op `linear_attention` (causal) through the same scan without decay; arguments as gla."""
    if not causal:
        raise ValueError("linear_attention (triton): the chunked scan is causal; causal=False is q (K^T V), two "
                         "products any impl reads")
    return _scan("linear_attention", q, k, v, None, scale, initial_state, output_final_state, cu_seqlens, chunk,
                 block_v)


def _scan(op, q, k, v, log_decay, scale, initial_state, output_final_state, cu_seqlens, chunk, block_v):
    _check(op, q, k, v, log_decay, initial_state, cu_seqlens)
    kv0, k_sum0 = (None, None) if initial_state is None else tuple(initial_state)
    num, den, kv, k_sum = ChunkGlaTriton.apply(q, k, v, log_decay, kv0, k_sum0, 1.0 if scale is None else float(scale),
                                               cu_seqlens, (chunk, block_v))
    return (num, den, (kv, k_sum)) if output_final_state else (num, den)
