"""seqmix's Triton kernels (src/ops/fem/fem_softmax_read_triton.py, src/ops/gla/gla_triton.py) on the CPU, under
Triton's interpreter (TRITON_INTERPRET=1 runs a kernel's own source on CPU tensors), against the naive twins
(seqmix.ops.*, impl="naive"): outputs, final states and every input gradient, in float32, float16 and bfloat16,
at the interpreter's small blocks and once at the GPU's; and every kernel compiled for sm_80 and sm_90 (no GPU
needed) within A100's and H100's registers and shared memory.

Accuracy, FlashAttention's rule: the reference is the naive twin in float64 on the same rounded inputs; a kernel's
relative RMS error may be at most twice that of the naive twin computed in the inputs' dtype, and never needs to be
below FLOOR = 32 float32 epsilons: both accumulate in float32, in different orders, and in float32 the naive twin's
error is itself a few epsilons, as often below one as above. A reference that is exactly zero (q's gradient when
each query sees one key) holds the kernel's values to FLOOR times the case's largest reference RMS.

bfloat16: under the interpreter tl.dot multiplies bfloat16 operands' bit patterns (triton issue 11584), so the
bfloat16 cases set the kernel files' INTERPRETER_DOT_IN_FP32 flag, which makes every product cast its operands to
float32 first (the roundings of the kernels' own casts to bfloat16 stay); compiled kernels never set it."""
import concurrent.futures
import contextlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
import unittest

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: @triton.jit then makes interpreted kernels

import torch  # noqa: E402
import triton.language as tl  # noqa: E402

import seqmix  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEM_PATH = ROOT / "src/ops/fem/fem_softmax_read_triton.py"
GLA_PATH = ROOT / "src/ops/gla/gla_triton.py"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fem = load(FEM_PATH, "fem_softmax_read_triton")
gla = load(GLA_PATH, "gla_triton")

F64 = torch.float64
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FLOOR = 32 * torch.finfo(torch.float32).eps
# Interpreter blocks: 16 rows, keys and positions (tl.dot's smallest), so lengths 15, 16, 17 cross a block.
BLOCK = 16
LENGTHS = (1, BLOCK - 1, BLOCK, BLOCK + 1)


@contextlib.contextmanager
def dots_in_fp32(dtype):
    """For bfloat16, the interpreter-only conversion of tl.dot's operands (module docstring)."""
    modules = (fem, gla)
    saved = [m.INTERPRETER_DOT_IN_FP32 for m in modules]
    for m in modules:
        m.INTERPRETER_DOT_IN_FP32 = tl.constexpr(dtype == torch.bfloat16)
    try:
        yield
    finally:
        for m, value in zip(modules, saved):
            m.INTERPRETER_DOT_IN_FP32 = value


def rms(x):
    return x.to(F64).pow(2).mean().sqrt().item() if x.numel() else 0.0


class KernelCase(unittest.TestCase):
    def assert_close(self, what, dtype, ours, naive, ref):
        """ours, naive, ref: dicts name -> tensor (None: no gradient, which all three must agree on)."""
        largest = max(rms(x) for x in ref.values() if x is not None)
        for name in ref:
            if ref[name] is None:
                self.assertIsNone(ours[name], f"{what}: {name} has a gradient but the naive twin has none")
                continue
            self.assertEqual(tuple(ours[name].shape), tuple(ref[name].shape), f"{what}: {name}'s shape")
            scale = rms(ref[name])
            if scale == 0:
                size = rms(ours[name])
                self.assertLessEqual(size, FLOOR * largest, f"{what}: {name} is {size:.3g}, the reference 0")
                continue
            err = rms(ours[name].to(F64) - ref[name]) / scale
            base = rms(naive[name].to(F64) - ref[name]) / scale
            tol = max(2 * base, FLOOR)
            self.assertTrue(math.isfinite(err) and err <= tol,
                            f"{what}: {name} relative RMS error {err:.3g} > {tol:.3g} (naive twin in {dtype}: "
                            f"{base:.3g})")


def run_with_grads(fn, inputs, upstream):
    """fn(*inputs) -> tuple of outputs; returns {out_i: output, name: grad} with sum(out_i * upstream_i) backward."""
    leaves = {name: (x.detach().clone().requires_grad_() if x is not None and x.is_floating_point() else x)
              for name, x in inputs.items()}
    outs = fn(**leaves)
    total = sum((o.to(F64) * u.to(F64)).sum() for o, u in zip(outs, upstream))
    total.backward()
    result = {f"out{i}": o.detach() for i, o in enumerate(outs)}
    for name, x in leaves.items():
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            result["d" + name] = None if x.grad is None else x.grad.detach()
    return result


def versions(fn_ours, fn_naive, inputs64, dtype, upstream64):
    """(ours, naive, reference): the kernel and the naive twin on the inputs rounded to dtype, and the naive twin
    in float64 on the same rounded values."""
    rounded = {n: (x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
               for n, x in inputs64.items()}
    up = [u.to(dtype) for u in upstream64]
    with dots_in_fp32(dtype):
        ours = run_with_grads(fn_ours, rounded, up)
    naive = run_with_grads(fn_naive, rounded, up)
    ref_in = {n: (x.to(F64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x)
              for n, x in rounded.items()}
    ref = run_with_grads(fn_naive, ref_in, [u.to(F64) for u in up])
    return ours, naive, ref


# ---- FEM's softmax read --------------------------------------------------------------------------------------

def fem_inputs(B, T, S, H, dk, dv, seed, cap):
    g = torch.Generator().manual_seed(seed)
    beta = torch.rand(H * dv, generator=g, dtype=F64) * 4 + 0.5
    # Values up to a few cap/beta: some are clipped, some not.
    v = torch.randn(B, S, H, dv, generator=g, dtype=F64) * (cap / beta.view(H, dv)) * 0.6
    return {"q": torch.randn(B, T, H, dk, generator=g, dtype=F64),
            "k": torch.randn(B, S, H, dk, generator=g, dtype=F64), "v": v, "beta": beta}


class FemSoftmaxReadTriton(KernelCase):
    def check(self, B, T, S, H, dk, dv, dtype=torch.float32, causal=True, cap=10.0, key_mask=None, cu_seqlens=None,
              blocks=(BLOCK, BLOCK), seed=0):
        inputs = fem_inputs(B, T, S, H, dk, dv, seed, cap)
        g = torch.Generator().manual_seed(seed + 1)
        upstream = [torch.randn(B, T, H, dv, generator=g, dtype=F64) for _ in range(2)]
        scale = 1 / math.sqrt(dk)

        def ours(q, k, v, beta):
            return fem.fem_softmax_read(q, k, v, beta, cap, causal, scale, key_mask, cu_seqlens, *blocks)

        def naive(q, k, v, beta):
            return seqmix.ops.fem_softmax_read(q, k, v, beta, cap, causal, scale, key_mask, impl="naive",
                                               cu_seqlens=cu_seqlens)

        what = f"fem B={B} T={T} S={S} H={H} dk={dk} dv={dv} {dtype} causal={causal} cap={cap} " \
               f"mask={key_mask is not None} cu={None if cu_seqlens is None else cu_seqlens.tolist()} blocks={blocks}"
        self.assert_close(what, dtype, *versions(ours, naive, inputs, dtype, upstream))

    def test_lengths_around_a_block(self):
        for T in LENGTHS:
            self.check(2, T, T, 2, 32, 32, seed=T)

    def test_fewer_queries_than_keys_and_bidirectional(self):
        self.check(1, 5, BLOCK + 3, 2, 32, 48, causal=True)
        self.check(1, BLOCK + 1, BLOCK + 1, 1, 48, 32, causal=False)
        self.check(1, 3, BLOCK + 2, 1, 32, 32, causal=False)

    def test_padding_with_an_all_masked_row(self):
        S = BLOCK + 3
        mask = torch.rand(3, S, generator=torch.Generator().manual_seed(5)) > 0.4
        mask[0] = False  # every key of row 0 is padding: each query reads its own position
        mask[1, :6] = False  # leading padding: the first rows see no real key
        for causal in (True, False):
            self.check(3, BLOCK + 1, S, 1, 32, 32, causal=causal, key_mask=mask)

    def test_packed_sequences(self):
        cu = torch.tensor([0, 0, 1, BLOCK + 2, BLOCK + 2, BLOCK + 5])  # empty, length 1, a block + 1, empty, 3
        for causal in (True, False):
            self.check(1, BLOCK + 5, BLOCK + 5, 2, 32, 32, causal=causal, cu_seqlens=cu)

    def test_half_precision(self):
        mask = torch.ones(2, BLOCK + 2, dtype=torch.bool)
        mask[1, 3:7] = False
        for dtype in (torch.float16, torch.bfloat16):
            self.check(2, BLOCK + 1, BLOCK + 2, 2, 64, 64, dtype=dtype, key_mask=mask)
            self.check(1, BLOCK + 5, BLOCK + 5, 1, 32, 32, dtype=dtype, causal=False,
                       cu_seqlens=torch.tensor([0, 1, BLOCK + 5]))

    def test_every_head_width(self):
        # Each accepted width as dk and as dv once (the blocks of 64 and 128, masked and whole).
        widths = fem.HEAD_WIDTHS
        for dk, dv in zip(widths, reversed(widths)):
            self.check(1, 3, 3, 1, dk, dv, seed=dk)

    def test_cap_forty(self):
        self.check(1, BLOCK + 1, BLOCK + 1, 1, 32, 32, cap=40.0)
        self.check(1, BLOCK + 1, BLOCK + 1, 1, 32, 32, dtype=torch.bfloat16, cap=40.0)

    def test_gpu_block_sizes(self):
        for dtype in (torch.float32, torch.bfloat16):
            self.check(1, 70, 70, 1, 64, 64, dtype=dtype, blocks=(None, None))

    def test_exact_causality(self):
        """Changing key t changes no output before t, bit for bit (the shift only sees keys every row of a block
        sees)."""
        inputs = fem_inputs(1, 3 * BLOCK, 3 * BLOCK, 1, 32, 32, 7, 10.0)
        base = fem.fem_softmax_read(**inputs_as(inputs, torch.float32), cap=10.0, block_m=BLOCK, block_n=BLOCK)
        for t in (BLOCK - 1, BLOCK + 5, 2 * BLOCK):
            changed = {n: x.clone() for n, x in inputs_as(inputs, torch.float32).items()}
            changed["v"][:, t] = 1e3  # clipped to the cap: the largest u, which moves every later shift
            changed["k"][:, t] *= -3
            out = fem.fem_softmax_read(**changed, cap=10.0, block_m=BLOCK, block_n=BLOCK)
            for a, b in zip(base, out):
                self.assertTrue(torch.equal(a[:, :t], b[:, :t]), f"changing key {t} changed an earlier output")
                self.assertFalse(torch.equal(a[:, t:], b[:, t:]))

    def test_bad_calls_are_one_line_errors(self):
        q = torch.randn(1, 4, 1, 32)
        v = torch.randn(1, 4, 1, 32)
        beta = torch.rand(32) + 0.5
        cases = [
            (dict(q=torch.randn(1, 4, 1, 24), k=torch.randn(1, 4, 1, 24)), "dk"),
            (dict(q=torch.randn(1, 4, 1, 256), k=torch.randn(1, 4, 1, 256)), "dk"),
            (dict(v=torch.randn(1, 4, 1, 40), beta=torch.rand(40) + 0.5), "dv"),
            (dict(cap=41.0), "cap"),
            (dict(cap=0.0), "cap"),
            (dict(q=q.double(), k=q.double(), v=v.double(), beta=beta.double()), "q"),
            (dict(k=q.half()), "k"),
            (dict(beta=beta.half()), "beta"),
            (dict(k=q.to("meta")), "k"),
            (dict(beta=torch.rand(31) + 0.5), "beta"),
            (dict(key_mask=torch.ones(1, 4)), "key_mask"),
            (dict(cu_seqlens=torch.tensor([0, 2, 4], dtype=torch.int32)), "cu_seqlens"),
            (dict(cu_seqlens=torch.tensor([0, 5])), "cu_seqlens"),
            (dict(q=torch.randn(1, 5, 1, 32)), "queries"),
        ]
        for change, word in cases:
            args = dict(q=q, k=q, v=v, beta=beta, cap=10.0)
            args.update(change)
            with self.assertRaises(ValueError, msg=str(change)) as caught:
                fem.fem_softmax_read(**args)
            message = str(caught.exception)
            self.assertNotIn("\n", message)
            self.assertIn(word, message)


def inputs_as(inputs, dtype):
    return {n: x.to(dtype) for n, x in inputs.items()}


# ---- the chunked scan: GLA and linear attention --------------------------------------------------------------

def scan_inputs(B, T, H, dk, dv, decay, n_states, seed, strength=1.0):
    g = torch.Generator().manual_seed(seed)
    inputs = {"q": torch.rand(B, T, H, dk, generator=g, dtype=F64) + 0.05,
              "k": torch.rand(B, T, H, dk, generator=g, dtype=F64) + 0.05,
              "v": torch.randn(B, T, H, dv, generator=g, dtype=F64)}
    if decay == "head":
        inputs["log_decay"] = -torch.rand(B, T, H, generator=g, dtype=F64) * strength
    elif decay == "key":
        inputs["log_decay"] = -torch.rand(B, T, H, dk, generator=g, dtype=F64) * strength
    if n_states:
        inputs["kv"] = torch.randn(n_states, H, dk, dv, generator=g, dtype=F64)
        inputs["k_sum"] = torch.rand(n_states, H, dk, generator=g, dtype=F64) + 0.5
    return inputs


class ChunkScanTriton(KernelCase):
    def check(self, B, T, H, dk, dv, decay="head", dtype=torch.float32, initial=True, cu_seqlens=None,
              sizes=(BLOCK, BLOCK), scale=0.5, strength=1.0, seed=0):
        n_states = (B if cu_seqlens is None else cu_seqlens.numel() - 1) if initial else 0
        inputs = scan_inputs(B, T, H, dk, dv, decay, n_states, seed, strength)
        N = B if cu_seqlens is None else cu_seqlens.numel() - 1
        g = torch.Generator().manual_seed(seed + 1)
        upstream = [torch.randn(B, T, H, dv, generator=g, dtype=F64), torch.randn(B, T, H, generator=g, dtype=F64),
                    torch.randn(N, H, dk, dv, generator=g, dtype=F64), torch.randn(N, H, dk, generator=g, dtype=F64)]

        def call(module, **extra):
            def fn(q, k, v, log_decay=None, kv=None, k_sum=None):
                state = None if kv is None else (kv, k_sum)
                if decay == "none":
                    num, den, (kv_t, ks_t) = module.linear_attention(q, k, v, True, scale=scale, initial_state=state,
                                                                     output_final_state=True, cu_seqlens=cu_seqlens,
                                                                     **extra)
                else:
                    num, den, (kv_t, ks_t) = module.gla(q, k, v, log_decay, scale=scale, initial_state=state,
                                                        output_final_state=True, cu_seqlens=cu_seqlens, **extra)
                return num, den, kv_t, ks_t
            return fn

        ours = call(gla, chunk=sizes[0], block_v=sizes[1])
        naive = call(seqmix.ops, impl="naive")
        what = f"{decay} decay B={B} T={T} H={H} dk={dk} dv={dv} {dtype} initial={initial} " \
               f"cu={None if cu_seqlens is None else cu_seqlens.tolist()} sizes={sizes}"
        self.assert_close(what, dtype, *versions(ours, naive, inputs, dtype, upstream))

    def test_lengths_around_a_chunk(self):
        for T in LENGTHS:
            self.check(2, T, 2, 32, 32, "head", seed=T)
        for T in (1, BLOCK + 1):
            self.check(1, T, 1, 32, 32, "key", seed=T)
            self.check(1, T, 2, 32, 32, "none", seed=T)

    def test_several_value_blocks_and_no_state(self):
        # dv = 48 in value blocks of 16: the normaliser and z belong to the first block only.
        self.check(1, BLOCK + 1, 2, 32, 48, "head", initial=False)
        self.check(1, BLOCK + 1, 1, 32, 48, "key", initial=False)

    def test_packed_sequences(self):
        cu = torch.tensor([0, 0, 1, BLOCK + 2, BLOCK + 2, BLOCK + 5])  # empty, length 1, a chunk + 1, empty, 3
        for decay in ("head", "key", "none"):
            self.check(1, BLOCK + 5, 1, 32, 32, decay, cu_seqlens=cu)

    def test_half_precision(self):
        for dtype in (torch.float16, torch.bfloat16):
            self.check(2, BLOCK + 1, 1, 32, 32, "head", dtype=dtype)
            self.check(1, BLOCK + 1, 1, 32, 32, "key", dtype=dtype)
            self.check(1, BLOCK + 1, 1, 32, 32, "none", dtype=dtype, cu_seqlens=torch.tensor([0, 3, BLOCK + 1]))

    def test_strong_decay(self):
        # Gates that forget at once beside a gentle head: the decay gradient's suffix sums stay accurate.
        self.check(1, 2 * BLOCK + 3, 1, 32, 32, "head", strength=10.0)
        self.check(1, BLOCK + 3, 1, 32, 32, "key", strength=10.0)

    def test_every_head_width(self):
        widths = gla.HEAD_WIDTHS
        for dk, dv in zip(widths, reversed(widths)):
            self.check(1, 3, 1, dk, dv, "head", seed=dk)
        for dk in (16, 128):
            self.check(1, 3, 1, dk, 32, "key", seed=dk)

    def test_gpu_sizes(self):
        for decay in ("head", "key"):
            self.check(1, 70, 1, 64, 128, decay, sizes=(None, None))
        self.check(1, 70, 1, 128, 64, "head", dtype=torch.bfloat16, sizes=(None, None))

    def test_bad_calls_are_one_line_errors(self):
        q = torch.rand(1, 4, 1, 32)
        v = torch.randn(1, 4, 1, 32)
        a = -torch.rand(1, 4, 1)
        state = (torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32))
        cases = [
            (gla.gla, dict(q=torch.rand(1, 4, 1, 24), k=torch.rand(1, 4, 1, 24)), "dk"),
            (gla.gla, dict(v=torch.randn(1, 4, 1, 144)), "dv"),
            (gla.gla, dict(q=q.double(), k=q.double(), v=v.double(), log_decay=a.double()), "q"),
            (gla.gla, dict(log_decay=a.half()), "log_decay"),
            (gla.gla, dict(log_decay=None), "log_decay"),
            (gla.gla, dict(log_decay=-torch.rand(1, 4, 2)), "log_decay"),
            (gla.gla, dict(v=v.to("meta")), "v"),
            (gla.gla, dict(initial_state=(torch.zeros(2, 1, 32, 32), torch.zeros(2, 1, 32))), "initial_state"),
            (gla.gla, dict(initial_state=(state[0].double(), state[1])), "initial kv"),
            (gla.gla, dict(cu_seqlens=torch.tensor([0, 3])), "cu_seqlens"),
            (gla.linear_attention, dict(causal=False), "causal"),
        ]
        for fn, change, word in cases:
            args = dict(q=q, k=q, v=v) if fn is gla.linear_attention else dict(q=q, k=q, v=v, log_decay=a)
            args.update(change)
            with self.assertRaises(ValueError, msg=str(change)) as caught:
                fn(**args)
            message = str(caught.exception)
            self.assertNotIn("\n", message)
            self.assertIn(word, message)


# ---- compiled for the GPUs ----------------------------------------------------------------------------------

# Shared memory a block may opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin): A100 (sm_80), H100 (sm_90).
SHARED_LIMIT = {80: 166912, 90: 232448}
# The spills a configuration has (cuobjdump's STACK bytes per thread: local memory for spilled registers), as
# measured with Triton 3.9; every other configuration has none. GLA's backward holds two passes' blocks; float32's
# tf32x3 products triple the operand registers; sm_80's mma layouts take more registers than sm_90's. A
# configuration spilling more than listed fails (then retune src/ops/gla/gla_triton.py's GPU_SIZES).
ALLOWED_STACK = {
    "chunk_gla_bwd_kernel bfloat16 sm_80 BK=128 BT=16 BV=16 EXACT=False PER_KEY=False": 64,
    "chunk_gla_bwd_kernel bfloat16 sm_80 BK=128 BT=16 BV=16 EXACT=False PER_KEY=True": 576,
    "chunk_gla_bwd_kernel bfloat16 sm_80 BK=64 BT=16 BV=16 EXACT=False PER_KEY=True": 24,
    "chunk_gla_bwd_kernel float16 sm_80 BK=128 BT=16 BV=16 EXACT=False PER_KEY=False": 24,
    "chunk_gla_bwd_kernel float16 sm_80 BK=128 BT=16 BV=16 EXACT=False PER_KEY=True": 568,
    "chunk_gla_bwd_kernel float16 sm_80 BK=64 BT=16 BV=16 EXACT=False PER_KEY=True": 24,
    "chunk_gla_bwd_kernel float32 sm_80 BK=128 BT=16 BV=16 EXACT=True PER_KEY=False": 1104,
    "chunk_gla_bwd_kernel float32 sm_80 BK=128 BT=16 BV=16 EXACT=True PER_KEY=True": 672,
    "chunk_gla_bwd_kernel float32 sm_80 BK=64 BT=16 BV=16 EXACT=True PER_KEY=False": 80,
    "chunk_gla_bwd_kernel float32 sm_80 BK=64 BT=16 BV=16 EXACT=True PER_KEY=True": 24,
    "chunk_gla_bwd_kernel float32 sm_90 BK=128 BT=16 BV=32 EXACT=True PER_KEY=False": 352,
    "chunk_gla_bwd_kernel float32 sm_90 BK=128 BT=16 BV=32 EXACT=True PER_KEY=True": 88,
    "chunk_gla_bwd_kernel float32 sm_90 BK=64 BT=16 BV=32 EXACT=True PER_KEY=False": 48,
    "chunk_gla_fwd_kernel float32 sm_80 BK=128 BT=16 BV=16 EXACT=True PER_KEY=False": 64,
    "chunk_gla_fwd_kernel float32 sm_80 BK=128 BT=16 BV=16 EXACT=True PER_KEY=True": 16,
    "chunk_gla_fwd_kernel float32 sm_90 BK=128 BT=16 BV=32 EXACT=True PER_KEY=False": 24,
    "fem_softmax_read_bwd_dkdv_kernel float32 sm_90 BLOCK_DK=128 BLOCK_DV=64 BLOCK_M=16 BLOCK_N=16 EXACT=True": 16,
    "fem_softmax_read_bwd_dq_kernel float32 sm_80 BLOCK_DK=64 BLOCK_DV=128 BLOCK_M=64 BLOCK_N=32 EXACT=True": 24,
}

# Run in fresh interpreters without TRITON_INTERPRET (this process's @triton.jit kernels are interpreted ones):
# compiles the jobs on stdin with triton.compile and reads each cubin's registers and stack with cuobjdump.
COMPILE = r"""
import importlib.util, json, re, shutil, subprocess, sys, tempfile
import torch, triton
from triton.backends.compiler import GPUTarget
jobs = json.load(sys.stdin)
modules = {}
cuobjdump = shutil.which("cuobjdump") or triton.knobs.nvidia.cuobjdump.path
results = []
for job in jobs:
    if job["path"] not in modules:
        spec = importlib.util.spec_from_file_location("m%d" % len(modules), job["path"])
        modules[job["path"]] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[job["path"]])
    m = modules[job["path"]]
    dtype = getattr(torch, job["dtype"])
    compiled = triton.compile(m.ast_source(getattr(m, job["kernel"]), dtype, job["constexprs"]),
                              target=GPUTarget("cuda", job["cc"], 32),
                              options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    results.append(dict(job, shared=compiled.metadata.shared, regs=int(found.group(1)), stack=int(found.group(2)),
                        scratch=compiled.metadata.global_scratch_size))
json.dump(results, sys.stdout)
"""


def compile_jobs():
    jobs = []
    for path, module in ((FEM_PATH, fem), (GLA_PATH, gla)):
        for kernel, dtype, constexprs, num_warps, num_stages, cc in module.launch_configs():
            jobs.append({"path": str(path), "kernel": kernel.__name__, "dtype": str(dtype).split(".")[1],
                         "constexprs": constexprs, "num_warps": num_warps, "num_stages": num_stages, "cc": cc})
    return jobs


def compile_all(jobs, workers=2):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    # As scripts/triton_aot.py compiles them (the cubins the build embeds), so both share Triton's cache: after the
    # build this test compiles nothing.
    env["TRITON_DISABLE_LINE_INFO"] = "1"

    def run(part):
        done = subprocess.run([sys.executable, "-c", COMPILE], input=json.dumps(part), capture_output=True,
                              text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"compiling failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout)

    parts = [jobs[i::workers] for i in range(workers)]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return [r for part in pool.map(run, parts) for r in part]


class CompiledForTheGpus(unittest.TestCase):
    def test_every_launch_configuration_fits_a100_and_h100(self):
        for result in compile_all(compile_jobs()):
            config = f"{result['kernel']} {result['dtype']} {result['constexprs']} warps={result['num_warps']} " \
                     f"sm_{result['cc']}"
            self.assertLessEqual(result["shared"], SHARED_LIMIT[result["cc"]], f"{config}: shared memory")
            self.assertLessEqual(result["regs"], 255, f"{config}: registers")
            key = f"{result['kernel']} {result['dtype']} sm_{result['cc']} " + \
                " ".join(f"{k}={v}" for k, v in sorted(result["constexprs"].items()))
            self.assertLessEqual(result["stack"], ALLOWED_STACK.get(key, 0), f"{config}: spills to local memory")
            self.assertEqual(result["scratch"], 0, f"{config}: global scratch (the C++ launcher passes none)")


if __name__ == "__main__":
    unittest.main()
