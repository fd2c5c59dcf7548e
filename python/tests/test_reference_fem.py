"""The Free Energy Mixer (`fem:`) against its plain-PyTorch reference (python/reference/fem_reference.py) in float64:
the output and the gradients w.r.t. the input and every parameter, on the same re-randomised weights, for every
prior, flag combinations, both budgets, the value cap on (40) and off (0), causal and bidirectional, RoPE auto/off.
Plus known values of the outer gate's RMS normalisation (its eps floor), hand-computed."""
import math
import unittest
import zlib

import torch

import closeness
import seqmix
import fem_reference as ref

torch.set_num_threads(1)
DTYPE = torch.float64
WORST = {"output": 0.0, "gradient": 0.0}  # the largest relative differences met (printed at the end)


def rerandomise(mixer, generator):
    """Every parameter drawn afresh so every term is exercised: matrices N(0, 1/fan_in), biases and the zero- or
    one-initialised parameters (beta, LayerNorms, the conditioner's zero output, D) moved off their init."""
    with torch.no_grad():
        for name, p in mixer.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=DTYPE)
            if name == "conditioner.output":
                p.copy_(0.5 * noise)
            elif name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * noise)
            elif name == "prior.A_param":
                p.copy_(p + 0.3 * noise)
            elif p.dim() == 1:
                p.copy_(0.3 * noise)
            else:
                p.copy_(noise / math.sqrt(p.shape[1]))


def spec_of(options):
    """`fem:k=v,...` from the reference's keyword options."""
    keys = dict(options)
    parts = [f"prior={keys.pop('prior')}", f"flags={keys.pop('flags')}"]
    for k, v in keys.items():
        if k == "causal":
            v = int(v)
        parts.append(f"{k}={v}")
    return "fem:" + ",".join(parts)


def assert_close(test, actual, expected, what):
    """closeness.assert_close, recording in WORST the difference relative to max|expected| itself (no floor)."""
    closeness.assert_close(test, actual, expected, what)
    scale = expected.abs().max().item()
    if scale > 1e-12:  # else a gradient that is zero by an invariance (a key bias under a normalised prior)
        kind = "output" if what == "output" else "gradient"
        WORST[kind] = max(WORST[kind], (actual - expected).abs().max().item() / scale)


class FemAgainstReference(unittest.TestCase):
    def compare(self, dim=24, T=7, B=2, adjust=None, check=None, **options):
        """Builds the C++ layer for `options`, re-randomises it (then `adjust(params)`), and compares output and
        all gradients with the reference. Returns the reference's output."""
        options.setdefault("heads", 2)
        spec = spec_of(options)
        with self.subTest(spec=spec, dim=dim, T=T):
            generator = torch.Generator().manual_seed(zlib.crc32(f"{spec}/{dim}/{T}".encode()))
            mixer = seqmix.Mixer(spec, dim, 32).double()
            rerandomise(mixer, generator)
            if adjust is not None:
                with torch.no_grad():
                    adjust(dict(mixer.named_parameters()))
            x = torch.randn(B, T, dim, generator=generator, dtype=DTYPE)
            probe = torch.randn(B, T, dim, generator=generator, dtype=DTYPE)

            x_cpp = x.clone().requires_grad_()
            y_cpp = mixer(x_cpp)
            (y_cpp * probe).sum().backward()
            params = dict(mixer.named_parameters())

            tensors = {n: p.detach().clone().requires_grad_() for n, p in params.items()}
            weights = ref.Weights(tensors)
            x_ref = x.clone().requires_grad_()
            math_options = {k: v for k, v in options.items() if k != "impl"}  # impl: which kernels, not the math
            y_ref = ref.fem_reference(x_ref, weights, **math_options)
            self.assertEqual(weights.used, set(mixer.state_dict().keys()), "parameters the reference did not use")
            if check is not None:
                check(y_ref)
            grads = torch.autograd.grad((y_ref * probe).sum(), [x_ref] + [tensors[n] for n in params],
                                        allow_unused=True)

            assert_close(self, y_cpp.detach(), y_ref.detach(), "output")
            assert_close(self, x_cpp.grad, grads[0], "d/dx")
            for (name, p), g in zip(params.items(), grads[1:]):
                self.assertIsNotNone(p.grad, f"C++: no gradient for {name}")
                self.assertIsNotNone(g, f"reference: no gradient for {name}")
                assert_close(self, p.grad, g, f"d/d{name}")
            return y_ref

    def test_the_reference_reads_every_registered_prior(self):
        """A prior added to seqmix (src/layers/priors) needs its scores here, or none of these tests would see it."""
        fem = next(m for m in seqmix.registry()["mixers"] if m["name"] == "fem")
        prior = next(o for o in fem["options"] if o["key"] == "prior")
        self.assertEqual(list(ref.PRIORS), prior["choices"])

    # Every prior, the full FEM (CLTG), budget i, cap 40, RoPE auto, the conditioner at H_c = 3.
    def test_every_prior_full_fem(self):
        for prior in ref.PRIORS:
            for T in (7, 13):
                self.compare(T=T, prior=prior, flags="CLTG", tdc_hidden=3, adjust=delta_positive(prior))

    def test_every_prior_budget_ii(self):
        for prior in ref.PRIORS:
            self.compare(dim=20, prior=prior, flags="CLTG", budget="ii", tdc_hidden=3, adjust=delta_positive(prior))

    def test_every_prior_budget_i_awkward_width(self):  # D = 20: d = 8 (10 rounds down to 8), qk = 16
        for prior in ref.PRIORS:
            self.compare(dim=20, T=13, prior=prior, flags="CLTG", tdc_hidden=2, adjust=delta_positive(prior))

    def test_flag_subsets(self):
        for prior in ref.PRIORS:
            for flags in ("", "C", "L", "LT", "CLG", "LTG", "CLT", "CG"):
                self.compare(prior=prior, flags=flags, tdc_hidden=3, adjust=delta_positive(prior))

    # cap = 0: the shift is each query's causal running max (the C++ streams the read step by step).
    def test_every_prior_without_cap(self):
        for prior in ref.PRIORS:
            self.compare(T=13, prior=prior, flags="CLTG", cap=0, tdc_hidden=3, adjust=delta_positive(prior))
        for flags in ("L", "CLG"):
            self.compare(prior="gla", flags=flags, cap=0, tdc_hidden=3)

    def test_bidirectional(self):
        for prior in ref.BIDIRECTIONAL_PRIORS:
            for flags in ("CLTG", "LT", "", "CLG"):
                for cap in (40, 0):
                    self.compare(T=13, prior=prior, flags=flags, cap=cap, causal=False, tdc_hidden=3)

    def test_value_cap_active(self):
        """Values scaled so |beta v| passes the cap: the clamp (min/max, beta's gradient through the limit)."""
        def large_values(params):
            params["value.weight"].mul_(30)

        def clipped_somewhere(y):
            self.assertTrue(torch.isfinite(y).all())

        for prior in ("softmax", "linear", "lrnn_decay", "ssm"):
            self.compare(prior=prior, flags="CLTG", tdc_hidden=3, adjust=large_values, check=clipped_somewhere)
        self.compare(prior="aft", flags="LT", cap=2.5)  # a small cap: most values clipped
        self.compare(prior="gla", flags="CL", cap=1.5, tdc_hidden=3)
        self.compare(prior="softmax", flags="LTG", cap=2.5, causal=False)

    def test_clip_fraction_of_the_large_value_case(self):
        """The large-value case above really clips: over a third of |beta v| exceed 40 (softmax prior)."""
        mixer = seqmix.Mixer("fem:prior=softmax,flags=LT,heads=2", 24, 32).double()
        generator = torch.Generator().manual_seed(1)
        rerandomise(mixer, generator)
        with torch.no_grad():
            mixer.value.weight.mul_(30)
            x = torch.randn(2, 7, 24, generator=generator, dtype=DTYPE)
            v = torch.nn.functional.linear(x, mixer.value.weight, mixer.value.bias)
            beta = torch.nn.functional.softplus(mixer.beta_param + 1.8)
        self.assertGreater(((beta * v).abs() > 40).double().mean().item(), 1 / 3)
        self.compare(prior="softmax", flags="LT", adjust=lambda p: p["value.weight"].mul_(30))

    def test_rope_off_and_other_bases(self):
        for prior in ref.QUERY_KEY_PRIORS:
            self.compare(T=13, prior=prior, flags="CLTG", rope=0, tdc_hidden=3, adjust=delta_positive(prior))
        self.compare(T=13, prior="softmax", flags="LT", rope=1, rope_theta=100.0)
        self.compare(T=13, prior="linear", flags="LTG", rope_theta=7.0, causal=False)

    def test_the_sdpa_read_is_the_explicit_read(self):
        """fem_reference(read_with_sdpa=True), the plain-PyTorch FEM-SM layer the GPU benchmark times, equals the
        explicit score matrix's read in float64 (output and gradients), for the flag sets with and without L."""
        generator = torch.Generator().manual_seed(7)
        for flags, causal in (("CLTG", True), ("LT", True), ("L", False), ("CG", True)):
            with self.subTest(flags=flags, causal=causal):
                mixer = seqmix.Mixer(f"fem:prior=softmax,flags={flags},heads=2,causal={int(causal)}", 24, 32).double()
                rerandomise(mixer, generator)
                weights = {n: p.detach().clone().requires_grad_() for n, p in mixer.named_parameters()}
                x = torch.randn(2, 9, 24, generator=generator, dtype=DTYPE, requires_grad=True)
                options = dict(prior="softmax", flags=flags, heads=2, causal=causal)
                explicit = ref.fem_reference(x, weights, **options)
                sdpa = ref.fem_reference(x, weights, read_with_sdpa=True, **options)
                assert_close(self, sdpa, explicit, "output")
                leaves = [x] + list(weights.values())
                g_explicit = torch.autograd.grad(explicit.sum(), leaves, allow_unused=True)
                g_sdpa = torch.autograd.grad(sdpa.sum(), leaves, allow_unused=True)
                for a, b in zip(g_sdpa, g_explicit):
                    self.assertEqual(a is None, b is None)
                    if a is not None:
                        assert_close(self, a, b, "gradient")
        with self.assertRaisesRegex(ValueError, "read_with_sdpa reads the softmax prior"):
            ref.fem_reference(x.detach(), weights, prior="softmax", flags="L", heads=2, cap=0.0, read_with_sdpa=True)

    def test_default_conditioner_width(self):  # D = 64, H = 4: d = 32, H_c = d/16 = 2
        for prior in ("softmax", "gla", "ssm"):
            self.compare(dim=64, T=7, heads=4, prior=prior, flags="CLTG")

    def test_other_options(self):
        self.compare(prior="linear", flags="CLTG", eps=0.01, tdc_hidden=3)   # ReLU + eps features, gate floor
        self.compare(prior="gla", flags="CLTG", gate_normalizer=2.0, tdc_hidden=3)
        self.compare(prior="lrnn_decay", flags="LT", gate_normalizer=4.0)
        self.compare(prior="softmax", flags="CLTG", beta_offset=0.3, tdc_hidden=3)
        self.compare(prior="ssm", flags="CLTG", ssm_state=5, tdc_hidden=3)
        self.compare(prior="softmax", flags="CLTG", heads=3, dim=24, value_dim=18, qk_dim=12, tdc_hidden=3)
        self.compare(prior="softmax", flags="CLTG", impl="naive", tdc_hidden=3)
        self.compare(prior="gla", flags="CLTG", impl="naive", tdc_hidden=3)


def delta_positive(prior):
    """For prior=delta: the delta rule's implied weights are signed, and with free queries and keys the normaliser
    and the read of exp(beta v) cross zero (docs/fem.md: the read then explodes or meets its floors, identically in
    both). Keys nearly parallel at every position (a large bias on each head's lowest-frequency RoPE pair, which
    turns by <= 2e-3 rad per token) and queries equal to keys make w_ti ~ b_i prod_{j=i+1..t} (1 - b_j) > 0: a true
    distribution, so the comparison runs in the regime where FEM's read is an expectation."""
    if prior != "delta":
        return None

    def adjust(params):
        qk = params["prior.key.bias"].numel()
        heads = params["prior.write.bias"].numel()
        dk = qk // heads
        bias = torch.zeros(qk, dtype=DTYPE)
        for h in range(heads):
            bias[h * dk + dk // 2 - 1] = 3.0   # pair (dk/2 - 1, dk - 1): frequency theta^(-(dk-2)/dk)
            bias[h * dk + dk - 1] = 2.0
        params["prior.key.weight"].mul_(0.05)
        params["prior.key.bias"].copy_(bias)
        params["prior.query.weight"].copy_(params["prior.key.weight"])
        params["prior.query.bias"].copy_(bias)
        if "conditioner.output" in params:
            params["conditioner.output"].mul_(0.2)
    return adjust


class GateNormalisationKnownValues(unittest.TestCase):
    """g = a / sqrt(mean_head(a^2) + eps), eps = 1e-6 (decision 5, docs/fem.md), worked by hand:
    a = (3, 4):        mean(a^2) = 12.5;   g = (3, 4) / sqrt(12.500001)
    a = (3e-3, 4e-3):  mean(a^2) = 1.25e-5, + 1e-6 = 1.35e-5;  g = (sqrt(9/13.5), sqrt(16/13.5))
                       = (sqrt(2/3), sqrt(32/27)) = (0.816496580927726, 1.088662107903635)
                       (the authors' a / max(||a||, 1e-5) * sqrt(2) would give (0.8485, 1.1314): the floor matters)
    a = (1e-5, 0):     g = (1e-5 / sqrt(5e-11 + 1e-6), 0) = (1e-2 / sqrt(1.00005), 0)
                       = (0.009999750009375, 0)  (the floor dominates)."""
    CASES = [((3.0, 4.0), (3 / math.sqrt(12.500001), 4 / math.sqrt(12.500001))),
             ((3e-3, 4e-3), (0.816496580927726, 1.088662107903635)),
             ((1e-5, 0.0), (0.009999750009375, 0.0))]

    def test_reference_gate(self):
        for a, g in self.CASES:
            got = ref.gate_rms_normalise(torch.tensor(a, dtype=DTYPE), 1e-6)
            torch.testing.assert_close(got, torch.tensor(g, dtype=DTYPE), rtol=1e-12, atol=1e-15)

    def test_layer_gate(self):
        """The C++ layer's gate, read back from its output: flags=G, head width 2, W_g = 0 and b_g = softplus^-1(a),
        so g is the constant of the table above; out - b_o = W_o (g * mu) and W_o (D x d, full column rank) is
        inverted by least squares, against the same layer with g = 1 (flags empty)."""
        dim, heads = 24, 3
        a = torch.tensor([3.0, 4.0, 3e-3, 4e-3, 1e-5, 0.0], dtype=DTYPE)
        expected = torch.tensor([g for _, pair in self.CASES for g in pair], dtype=DTYPE)
        inverse_softplus = torch.where(a > 0, torch.log(torch.expm1(a.clamp_min(1e-300))), torch.tensor(-800.0, dtype=DTYPE))
        gated = seqmix.Mixer(f"fem:prior=softmax,flags=G,heads={heads},value_dim=6", dim, 32).double()
        plain = seqmix.Mixer(f"fem:prior=softmax,flags=,heads={heads},value_dim=6", dim, 32).double()
        generator = torch.Generator().manual_seed(3)
        rerandomise(gated, generator)
        with torch.no_grad():
            gated.gate_proj.weight.zero_()
            gated.gate_proj.bias.copy_(inverse_softplus)
            plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("gate_proj")})
            x = torch.randn(2, 5, dim, generator=generator, dtype=DTYPE)
            W, b = gated.output.weight, gated.output.bias
            z_gated = torch.linalg.lstsq(W, (gated(x) - b).reshape(-1, dim).T).solution.T   # [B*T, d] = g * mu
            z_plain = torch.linalg.lstsq(W, (plain(x) - b).reshape(-1, dim).T).solution.T   # mu
            g = z_gated / z_plain
        torch.testing.assert_close(g, expected.expand_as(g), rtol=1e-9, atol=1e-12)


def tearDownModule():
    print(f"\nfem vs reference: worst relative difference, output {WORST['output']:.2e}, "
          f"gradients {WORST['gradient']:.2e}")


if __name__ == "__main__":
    unittest.main()
