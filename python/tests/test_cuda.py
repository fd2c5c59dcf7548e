"""seqmix on a CUDA GPU, against the CPU's float64 naive twins (scripts/gpu_check.sh runs these on a GPU machine).

Every op with each implementation it has on CUDA, outputs and every input gradient, in float32 and bfloat16;
packed sequences equal to each sequence alone; every registered mixer's decode equal to its forward, and its
outputs equal to the CPU's; a few training steps of the language model equal to the same steps on the CPU; a run
written on the CPU loaded on the GPU. Without a GPU the module is skipped in one line (ctest reports it skipped).

Tolerances, relative to the largest reference value (at least 1), the reference reading the same rounded inputs in
float64:
float32 2e-4 (float32 reductions on the GPU against float64), bfloat16 3e-2 (computed in float32, the outputs and
gradients rounded to bfloat16's 8 bits once, and a few roundings inside PyTorch's bf16 kernels)."""
import copy
import os
import unittest

import torch

import seqmix
from closeness import scaled_difference
from op_samples import SAMPLES, floating, impls_on, ops, schema, state_inputs
from test_module_compile import MODEL_SIZES, inputs_of, model_of

CUDA = torch.device("cuda")


def setUpModule():
    if not torch.cuda.is_available():
        raise unittest.SkipTest("no GPU visible (torch.cuda.is_available() is False): the cuda tests run on a GPU "
                                "machine, scripts/gpu_check.sh")
# Bounds on scaled_difference, max |got - want| / max(1, max|want|): the samples are O(1), and a gradient that is zero
# by an invariance (a decode step's first read, independent of its query) is rounding noise on either side.
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2}
TOLERANCE[torch.float16] = TOLERANCE[torch.bfloat16]
# seqmix's own CUDA kernels (the Triton kernels compiled ahead of time, src/ops/*/fused_cuda.cpp), which read head
# widths that are multiples of 16 up to 128: FusedFemSoftmaxReadOnCuda and FusedScanOnCuda test them at their shapes;
# the sweep below skips them (its samples' widths are 3 and 4).
CUDA_KERNELS = {("fem_softmax_read", "fused"), ("gla", "fused"), ("linear_attention", "fused")}
# The FEM reads through those priors read in float64 (fem_capped_read), which the scan's CUDA kernel does not: impl
# 'fused' on CUDA is one line there (test_the_fem_reads_through_a_scan_refuse_fused_on_cuda_in_one_line).
FLOAT64_READS_OF_CUDA_KERNELS = {("fem_gla_read", "fused"), ("fem_linear_read", "fused")}


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


class EveryOp(unittest.TestCase):
    def outputs_and_gradients(self, name, args, impl, weights=None, dtype=torch.float64):
        """The op's outputs and the gradients of sum(output * weight) with respect to every floating input
        that is not a decode state; new weights are random numbers representable in `dtype` (the upstream
        gradient a dtype output receives), so the reference and the device differentiate the same loss."""
        states = state_inputs(name)
        leaves = [x for i, x in enumerate(args) if floating(x) and i not in states]
        for x in leaves:
            x.requires_grad_()
        out = as_tuple(getattr(ops(), name)(*args, **({"impl": impl} if impl else {})))
        returns = [r.name for r in schema(name).returns]
        arguments = [a.name for a in schema(name).arguments]
        scored = [(r, o) for r, o in zip(returns, out) if o is not None and r not in arguments]
        if weights is None:
            weights = [torch.randn(o.shape, dtype=torch.float64).to(dtype).double() for _, o in scored]
        loss = sum((o.double() * w.to(o.device)).sum() for (_, o), w in zip(scored, weights))
        grads = torch.autograd.grad(loss, leaves, allow_unused=True) if loss.requires_grad else [None] * len(leaves)
        return out, list(grads), weights

    def check(self, name, impl, dtype):
        sample = SAMPLES[name]()
        states = state_inputs(name)
        # The reference reads the inputs as the device does (rounded to dtype), in float64 on the CPU: what is left
        # is the device's arithmetic.
        reference_args = [x.to(dtype).double() if floating(x) and i not in states else
                          (x.double() if floating(x) else x) for i, x in enumerate(sample)]
        want, want_grads, weights = self.outputs_and_gradients(name, reference_args, "naive" if impl else None,
                                                               dtype=dtype)
        device_args = [x.to(CUDA, dtype) if floating(x) and i not in states else
                       (x.to(CUDA) if isinstance(x, torch.Tensor) and (x.dim() > 0 or i in states) else x)
                       for i, x in enumerate(sample)]
        got, got_grads, _ = self.outputs_and_gradients(name, device_args, impl, weights)
        tolerance = TOLERANCE[dtype]
        for i, (g, w) in enumerate(zip(got, want)):
            if w is None:
                self.assertIsNone(g)
                continue
            self.assertEqual(g.device.type, "cuda", f"output {i}")
            self.assertLess(scaled_difference(g, w), tolerance, f"output {i}")
        for i, (g, w) in enumerate(zip(got_grads, want_grads)):
            self.assertEqual(g is None, w is None, f"gradient {i}")
            if g is not None:
                self.assertLess(scaled_difference(g, w), tolerance, f"gradient {i}")

    def test_every_op_on_cuda_equals_the_cpu_float64_naive_twin(self):
        for name in sorted(SAMPLES):
            impls = impls_on(name, "cuda")
            for impl in (["auto"] + impls) if impls else [None]:
                if (name, impl) in CUDA_KERNELS | FLOAT64_READS_OF_CUDA_KERNELS:
                    continue
                for dtype in (torch.float32, torch.bfloat16):
                    with self.subTest(op=name, impl=impl, dtype=dtype):
                        self.check(name, impl, dtype)

    def test_the_fem_reads_through_a_scan_refuse_fused_on_cuda_in_one_line(self):
        for name, _ in sorted(FLOAT64_READS_OF_CUDA_KERNELS):
            with self.subTest(op=name):
                sample = [x.to(CUDA) if isinstance(x, torch.Tensor) and x.dim() > 0 else x for x in SAMPLES[name]()]
                with self.assertRaises(RuntimeError) as caught:
                    getattr(ops(), name)(*sample, impl="fused")
                message = str(caught.exception).splitlines()[0]
                self.assertIn(f"{name}: impl 'fused' on cuda", message)
                self.assertIn("impl 'auto', 'chunked' or 'naive' read on a GPU", message)

    def test_the_cpu_kernels_are_refused_on_cuda_in_one_line(self):
        x = torch.rand(1, 4, 3, device=CUDA)
        with self.assertRaises(RuntimeError) as caught:
            seqmix.aft(x, x, impl="fused")
        self.assertIn("aft has no impl 'fused' on cuda:0", str(caught.exception).splitlines()[0])

    def test_mixed_devices_are_one_line(self):
        q = torch.randn(1, 4, 2, 3)
        with self.assertRaises(RuntimeError) as caught:
            seqmix.attention(q.cuda(), q, q.cuda())
        self.assertIn("all tensors must be on one device", str(caught.exception).splitlines()[0])

    def test_packed_sequences_on_cuda_equal_each_alone_with_offsets_on_the_gpu(self):
        lengths = [3, 1, 0, 6]
        cu = torch.tensor([0, 3, 4, 4, 10], device=CUDA)
        q, k = torch.rand(1, 10, 2, 4, device=CUDA), torch.rand(1, 10, 2, 4, device=CUDA)
        v, decay = torch.randn(1, 10, 2, 5, device=CUDA), -torch.rand(1, 10, 2, device=CUDA)
        calls = {"attention": lambda q, k, v, d, **kw: seqmix.attention(q, k, v, **kw),
                 "linear_attention": lambda q, k, v, d, **kw: seqmix.linear_attention(q, k, v, **kw)[0],
                 "gla": lambda q, k, v, d, **kw: seqmix.gla(q, k, v, d, **kw)[0]}
        for name, call in calls.items():
            with self.subTest(op=name):
                packed = call(q, k, v, decay, cu_seqlens=cu)
                begin = 0
                for n in lengths:
                    if n:
                        alone = call(q[:, begin:begin + n], k[:, begin:begin + n], v[:, begin:begin + n],
                                     decay[:, begin:begin + n])
                        torch.testing.assert_close(packed[:, begin:begin + n], alone, atol=1e-5, rtol=1e-5)
                    begin += n


def fem_read_and_gradients(q, k, v, beta, weights, **kw):
    """fem_softmax_read's (mean, free_energy) and the gradients of sum(mean w0 + free_energy w1) w.r.t. q, k, v, beta."""
    leaves = [x.detach().requires_grad_() for x in (q, k, v, beta)]
    mean, free = seqmix.fem_softmax_read(*leaves, **kw)
    loss = (mean.double() * weights[0].to(mean.device)).sum() + (free.double() * weights[1].to(free.device)).sum()
    return [mean, free] + list(torch.autograd.grad(loss, leaves))


class FusedFemSoftmaxReadOnCuda(unittest.TestCase):
    """seqmix's CUDA kernel of the FEM softmax read (the Triton kernels of src/ops/fem/fem_softmax_read_triton.py,
    launched by src/ops/fem/fused_cuda.cpp) against the CPU's float64 naive twin reading the same rounded inputs:
    outputs and the gradients of q, k, v and beta, at awkward shapes (T not a multiple of a block, T = 1, more keys
    than queries, head widths from 16 to 128 in unequal pairs), causal and not, with padding (a batch row with every
    key masked among them), packed sequences with empty and length-1 ones, in bfloat16, float16 and float32."""

    HEAD_DIMS = [(16, 16), (32, 32), (64, 64), (128, 128), (48, 80), (80, 48), (64, 128), (128, 64), (112, 16)]

    def compare(self, q, k, v, beta, dtype, cap=8.0, **kw):
        torch.manual_seed(1)
        T, dv = q.shape[1], v.shape[3]
        weights = [torch.randn(q.shape[0], T, q.shape[2], dv, dtype=torch.float64).to(dtype).double() for _ in range(2)]
        rounded = [x.to(dtype) for x in (q, k, v, beta)]
        cpu_kw = {key: (x.cpu() if isinstance(x, torch.Tensor) else x) for key, x in kw.items()}
        want = fem_read_and_gradients(*[x.double() for x in rounded], weights, cap=cap, impl="naive", **cpu_kw)
        gpu_kw = {key: (x.to(CUDA) if isinstance(x, torch.Tensor) else x) for key, x in kw.items()}
        got = fem_read_and_gradients(*[x.to(CUDA) for x in rounded], weights, cap=cap, impl="fused", **gpu_kw)
        names = ["mean", "free_energy", "dq", "dk", "dv", "dbeta"]
        for name, g, w in zip(names, got, want):
            self.assertEqual(g.device.type, "cuda", name)
            self.assertEqual(g.dtype, dtype, name)
            self.assertTrue(torch.isfinite(g).all(), name)
            self.assertLess(scaled_difference(g, w), TOLERANCE[dtype], name)

    def inputs(self, B, T, S, H, dk, dv):
        g = torch.Generator().manual_seed(0)
        q, k = torch.randn(B, T, H, dk, generator=g), torch.randn(B, S, H, dk, generator=g)
        v = 2 * torch.randn(B, S, H, dv, generator=g)  # some values beyond the cap, so the clamp's gradient runs
        beta = torch.rand(H * dv, generator=g) + 0.5
        return q, k, v, beta

    def test_outputs_and_gradients_at_awkward_shapes(self):
        """Every pair of widths at T = 1, one row past a block and fewer queries than keys, in bfloat16; every block
        edge at d = 64; float16 and float32 at each width block."""
        cases = [(torch.bfloat16, dims, shape) for dims in self.HEAD_DIMS for shape in ((1, 1), (65, 65), (37, 100))]
        cases += [(torch.bfloat16, (64, 64), shape) for shape in ((15, 15), (16, 16), (17, 17), (63, 63), (64, 64),
                                                                   (130, 130))]
        cases += [(dtype, dims, (65, 65)) for dtype in (torch.float16, torch.float32)
                  for dims in ((64, 64), (128, 48), (32, 128))]
        for dtype, (dk, dv), (T, S) in cases:
            for causal in (True, False):
                with self.subTest(dtype=dtype, dk=dk, dv=dv, T=T, S=S, causal=causal):
                    self.compare(*self.inputs(2, T, S, 2, dk, dv), dtype, causal=causal)

    def test_padding_never_contributes(self):
        q, k, v, beta = self.inputs(3, 70, 70, 2, 64, 64)
        key_mask = torch.ones(3, 70, dtype=torch.bool)
        key_mask[0, :5] = False   # left padding
        key_mask[1, 40:] = False  # right padding
        key_mask[2] = False       # nothing real: each row reads its own key (the CPU kernels' rule)
        for causal in (True, False):
            with self.subTest(causal=causal):
                self.compare(q, k, v, beta, torch.bfloat16, causal=causal, key_mask=key_mask)

    def test_packed_sequences_with_empty_and_length_one_ones(self):
        q, k, v, beta = self.inputs(1, 80, 80, 2, 64, 64)
        cu_seqlens = torch.tensor([0, 3, 3, 4, 80])
        self.compare(q, k, v, beta, torch.bfloat16, cu_seqlens=cu_seqlens)

    def test_the_largest_cap_and_values_at_the_limit(self):
        q, k, v, beta = self.inputs(2, 96, 96, 2, 64, 64)
        self.compare(q, k, 50 * v, beta, torch.bfloat16, cap=40.0)

    def test_what_the_kernel_does_not_read_is_one_line(self):
        cases = [(tuple(x.bfloat16() for x in self.inputs(1, 8, 8, 2, 24, 24)), {}, "multiple of 16"),
                 (tuple(x.double() for x in self.inputs(1, 8, 8, 2, 64, 64)), {}, "float32, float16 or bfloat16"),
                 (tuple(x.bfloat16() for x in self.inputs(1, 8, 8, 2, 64, 64)), {"cap": 41.0}, "cap")]
        for args, kw, words in cases:
            with self.subTest(words=words):
                with self.assertRaises(RuntimeError) as caught:
                    seqmix.fem_softmax_read(*[x.to(CUDA) for x in args], impl="fused", **kw)
                message = str(caught.exception).splitlines()[0]
                self.assertIn("fem_softmax_read", message)
                self.assertIn(words, message)


def scan_and_gradients(q, k, v, decay, weights, **kw):
    """(numerator, normaliser) of gla (decay given) or linear_attention and the gradients of
    sum(numerator w0 + normaliser w1) with respect to q, k, v (and the decay)."""
    leaves = [x.detach().requires_grad_() for x in ((q, k, v) if decay is None else (q, k, v, decay))]
    out = seqmix.gla(*leaves, **kw) if decay is not None else seqmix.linear_attention(*leaves, **kw)
    loss = (out[0].double() * weights[0].to(out[0].device)).sum() + (out[1].double() * weights[1].to(out[1].device)).sum()
    return list(out) + list(torch.autograd.grad(loss, leaves))


class FusedScanOnCuda(unittest.TestCase):
    """seqmix's CUDA kernel of the chunked GLA scan (the Triton kernels of src/ops/gla/gla_triton.py, launched by
    src/ops/gla/fused_cuda.cpp), also linear attention's, against the CPU's float64 naive twin on the same rounded
    inputs: outputs and every input gradient at lengths around the 16-position chunk, head widths from 16 to 128,
    a decay per head and per key, packed sequences with empty and length-1 ones, in bfloat16, float16 and float32."""

    def compare(self, dtype, B, T, H, dk, dv, decay, cu_seqlens=None):
        g = torch.Generator().manual_seed(T * 131 + dk)
        q, k = torch.randn(B, T, H, dk, generator=g) / dk ** 0.5, torch.randn(B, T, H, dk, generator=g)
        v = torch.randn(B, T, H, dv, generator=g)
        log_decay = None if decay is None else -0.3 * torch.rand(*((B, T, H) if decay == "head" else (B, T, H, dk)),
                                                                 generator=g)
        weights = [torch.randn(B, T, H, dv, dtype=torch.float64).to(dtype).double(),
                   torch.randn(B, T, H, dtype=torch.float64).to(dtype).double()]
        rounded = [None if x is None else x.to(dtype) for x in (q, k, v, log_decay)]
        kw = {} if cu_seqlens is None else {"cu_seqlens": cu_seqlens}
        want = scan_and_gradients(*[None if x is None else x.double() for x in rounded], weights, impl="naive", **kw)
        gpu_kw = {key: x.to(CUDA) for key, x in kw.items()}
        got = scan_and_gradients(*[None if x is None else x.to(CUDA) for x in rounded], weights, impl="fused",
                                 **gpu_kw)
        names = ["numerator", "normaliser", "dq", "dk", "dv", "dlog_decay"]
        for name, a, b in zip(names, got, want):
            self.assertEqual(a.device.type, "cuda", name)
            self.assertEqual(a.dtype, dtype, name)
            self.assertTrue(torch.isfinite(a).all(), name)
            self.assertLess(scaled_difference(a, b), TOLERANCE[dtype], name)

    def test_lengths_widths_and_decays(self):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            for decay in ("head", "key", None):
                for T in (1, 15, 16, 17, 65):
                    with self.subTest(dtype=dtype, decay=decay, T=T):
                        self.compare(dtype, 2, T, 2, 64, 64, decay)
                for dk, dv in ((16, 16), (128, 128), (32, 96), (128, 16), (80, 48)):
                    with self.subTest(dtype=dtype, decay=decay, dk=dk, dv=dv):
                        self.compare(dtype, 1, 33, 2, dk, dv, decay)

    def test_packed_sequences_with_empty_and_length_one_ones(self):
        cu_seqlens = torch.tensor([0, 3, 3, 4, 80])
        for decay in ("head", "key", None):
            with self.subTest(decay=decay):
                self.compare(torch.bfloat16, 1, 80, 2, 64, 64, decay, cu_seqlens)

    def test_what_the_kernel_does_not_read_is_one_line(self):
        q = torch.randn(1, 8, 2, 24, device=CUDA)
        with self.assertRaises(RuntimeError) as caught:
            seqmix.gla(q, q, q, -torch.rand(1, 8, 2, device=CUDA), impl="fused")
        self.assertIn("multiple of 16", str(caught.exception).splitlines()[0])


class EveryMixer(unittest.TestCase):
    def mixers(self):
        """Every registered mixer, and FEM on every prior (each reads through its own op on the GPU)."""
        registry = seqmix.registry()["mixers"]
        fem = next(m for m in registry if m["name"] == "fem")
        priors = next(o for o in fem["options"] if o["key"] == "prior")["type"].split("|")
        return [m["name"] for m in registry] + [f"fem:prior={p}" for p in priors if p != "softmax"]

    def test_every_mixer_on_cuda_equals_the_cpu_outputs_and_gradients(self):
        for name in self.mixers():
            with self.subTest(mixer=name):
                report = seqmix.verify_mixer(name, only=["cuda"])
                self.assertTrue(report.passed, str(report))

    def test_every_causal_mixer_decodes_on_cuda_as_its_forward(self):
        torch.manual_seed(0)
        for name in self.mixers():
            mixer = seqmix.Mixer(name, 32, 64).double()
            if not mixer.is_causal:
                continue
            with self.subTest(mixer=name):
                mixer = mixer.to(CUDA).eval()
                x = torch.randn(2, 9, 32, dtype=torch.float64, device=CUDA)
                with torch.no_grad():
                    full = mixer(x)
                    state = mixer.init_state(2)
                    steps = torch.stack([mixer.step(x[:, t], state) for t in range(9)], 1)
                self.assertEqual(steps.device.type, "cuda")
                torch.testing.assert_close(steps, full, atol=1e-9, rtol=1e-9)


class EveryChannelMixerAndModel(unittest.TestCase):
    """The registry's channel mixers and models (as test_module_compile.py builds them) on CUDA: outputs and every
    parameter's gradient equal the CPU's, in float64 on both (a mixture of experts routes alike)."""

    def compare(self, module, x):
        def run(module, x):
            module.zero_grad(set_to_none=True)
            y = module(x)
            (y.double() * torch.linspace(-1, 1, y.numel(), dtype=torch.float64, device=y.device).view(y.shape)).sum().backward()
            return y, {n: p.grad for n, p in module.named_parameters()}

        torch.manual_seed(0)
        want, want_grads = run(module, x)
        gpu = copy.deepcopy(module).to(CUDA)
        got, got_grads = run(gpu, x.to(CUDA))
        self.assertEqual(got.device.type, "cuda")
        self.assertLess(scaled_difference(got, want), 1e-9)
        for name, w in want_grads.items():
            self.assertEqual(got_grads[name] is None, w is None, name)
            if w is not None:
                self.assertLess(scaled_difference(got_grads[name], w), 1e-9, name)

    def test_every_channel_mixer(self):
        for entry in seqmix.registry()["channel_mixers"]:
            if entry["name"] == "none":
                continue
            with self.subTest(spec=entry["name"]):
                torch.manual_seed(0)
                self.compare(seqmix.ChannelMixer(entry["name"], 16).double(), torch.randn(2, 10, 16, dtype=torch.float64))

    def test_every_model(self):
        for name in MODEL_SIZES:
            with self.subTest(model=name):
                torch.manual_seed(0)
                x = inputs_of(name)
                self.compare(model_of(name).double(), x.double() if x.is_floating_point() else x)


class Training(unittest.TestCase):
    def steps(self, device, n=4):
        torch.manual_seed(0)
        model = seqmix.LanguageModel(vocab_size=32, mixers=["fem:prior=softmax", "gla"], dim=32, layers=2,
                                     max_len=16).to(device)
        # SGD: its steps are linear in the gradients, so rounding differences stay rounding differences (AdamW's
        # m / sqrt(v) turns a gradient that is zero up to rounding, e.g. a key bias under softmax, into +-lr).
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(n):
            tokens = torch.randint(0, 32, (4, 17), generator=g).to(device)
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), tokens[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, {k: v.cpu() for k, v in model.state_dict().items()}

    def test_a_few_training_steps_on_cuda_equal_the_same_steps_on_the_cpu(self):
        """Float32 on both; the GPU's reductions (and its implementations: SDPA, the chunked scan) differ in order,
        so within 1e-4 of the loss and 1e-3 of each weight's scale after 4 SGD steps."""
        cpu_losses, cpu_weights = self.steps("cpu")
        gpu_losses, gpu_weights = self.steps(CUDA)
        for a, b in zip(cpu_losses, gpu_losses):
            self.assertLess(abs(a - b), 1e-4 * max(1.0, abs(a)))
        for key, w in cpu_weights.items():
            self.assertLess(((gpu_weights[key] - w).abs().max() / w.abs().max().clamp_min(1e-6)).item(), 1e-3, key)

    def test_bf16_autocast_on_cuda_trains(self):
        model = seqmix.LanguageModel(vocab_size=32, mixers=["softmax"], dim=32, layers=1, max_len=16).to(CUDA)
        tokens = torch.randint(0, 32, (4, 16), device=CUDA)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 32), tokens.reshape(-1))
        loss.backward()
        for p in model.parameters():
            self.assertEqual(p.grad.dtype, torch.float32)
            self.assertTrue(torch.isfinite(p.grad).all())


class Runs(unittest.TestCase):
    """A run `seqmix train` wrote on the CPU (tests/data/cpu_run; its config.yaml says how it was made), on the GPU."""

    RUN = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "cpu_run")

    def test_a_cpu_run_loads_on_cuda_and_gives_the_cpu_logits(self):
        cpu = seqmix.load_run(self.RUN)
        gpu = seqmix.load_run(self.RUN, device="cuda")
        self.assertEqual(gpu.device.type, "cuda")
        tokens = torch.randint(0, 16, (2, 12))
        with torch.no_grad():
            torch.testing.assert_close(gpu.model(tokens.cuda()).cpu(), cpu.model(tokens), atol=1e-4, rtol=1e-4)

    def test_decoding_on_cuda_gives_the_cpu_logits_step_by_step(self):
        """(Compared as logits: a barely trained model's greedy tokens can tie, and break ties by rounding.)"""
        cpu = seqmix.load_run(self.RUN)
        gpu = seqmix.load_run(self.RUN, device="cuda")
        tokens = torch.randint(0, 16, (2, 10))
        with torch.no_grad():
            state_cpu, state_gpu = cpu.model.init_state(2), gpu.model.init_state(2)
            for t in range(tokens.shape[1]):
                want = cpu.model.step(tokens[:, t], state_cpu)
                got = gpu.model.step(tokens[:, t].cuda(), state_gpu)
                self.assertEqual(got.device.type, "cuda")
                torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)
            sampled = gpu.model.generate(tokens[:, :3].cuda(), 5, 1.0, 0, 7)
            self.assertEqual(sampled.shape, (2, 8))
            self.assertEqual(sampled.device.type, "cuda")


if __name__ == "__main__":
    unittest.main()
