"""The baseline sequence mixers (softmax, relu, linear, gla, delta, ssm) against independent plain-PyTorch
references (python/reference/attention_reference.py), and known values for RoPE and RMSNorm.

Each case builds the C++ mixer through the binding (seqmix.Mixer(spec).double()), re-randomises every parameter
(so zero biases and unit gains are exercised), runs the layer and the reference on the same weights and the same
random float64 input, and compares the output and the gradients w.r.t. the input and every parameter. The
reference reads its weights by the layer's state_dict names, and the set it read must equal the state_dict's keys.
"""
import math
import unittest

import torch

import attention_reference as ref
import seqmix
from closeness import assert_close

torch.set_num_threads(1)

B = 2
MAX_DIFFERENCES = {}  # case -> the largest |layer - reference| over output and gradients, relative to their scale


class TrackedWeights(dict):
    """A dict that records which keys were read (by [] or get), so a weight the reference never used shows."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:
            self.read.add(key)
        return super().get(key, default)


def rerandomise(mixer, generator):
    """Every parameter to small random values of a sensible scale (zeros and ones included)."""
    with torch.no_grad():
        for name, p in mixer.named_parameters():
            def randn(*shape):
                return torch.randn(*shape, generator=generator, dtype=torch.float64)
            if name == "A_log":                    # A = -exp(A_log): rates around 1..N, perturbed
                n = p.shape[1]
                value = torch.log(torch.arange(1, n + 1, dtype=torch.float64)).repeat(p.shape[0], 1) + 0.2 * randn(*p.shape)
            elif name == "D_skip":
                value = 1.0 + 0.5 * randn(*p.shape)
            elif name == "dt_proj.bias":           # softplus^-1 of step sizes in [0.02, 0.5]
                dt = 0.02 + 0.48 * torch.rand(p.shape, generator=generator, dtype=torch.float64)
                value = dt + torch.log(-torch.expm1(-dt))
            elif name == "conv.weight":
                value = 0.5 * randn(*p.shape)
            elif name.endswith(".bias"):
                value = 0.3 * randn(*p.shape)
            elif name == "decay.weight":           # decay logits of order a few units
                value = 2.0 * randn(*p.shape) / math.sqrt(p.shape[1])
            else:                                  # Linear weights [out, in]
                value = randn(*p.shape) / math.sqrt(p.shape[1])
            p.copy_(value)


def shrink_normalisers(D):
    """A weight adjustment under which every normaliser of a width-D linear-attention or GLA layer is below eps:
    q's bias pushed far negative (phi(q) = eps in every feature), k's bias zeroed and its weights made small (but
    still with gradients)."""

    def adjust(params):
        with torch.no_grad():
            params["qkv.bias"][:D].fill_(-10.0)
            params["qkv.bias"][D:2 * D].zero_()
            params["qkv.weight"][D:2 * D].mul_(0.01)

    return adjust


class ReferenceCase(unittest.TestCase):
    def compare(self, spec, reference, options, dim, T, seed=0, max_len=32, adjust=None):
        """The C++ mixer `spec` against reference(x, weights, **options): output and every gradient. `adjust`
        (params by name) may set some parameters after the re-randomisation."""
        generator = torch.Generator().manual_seed(seed)
        mixer = seqmix.Mixer(spec, dim, max_len).double()
        rerandomise(mixer, generator)
        if adjust is not None:
            adjust(dict(mixer.named_parameters()))
        x = (torch.randn(B, T, dim, generator=generator, dtype=torch.float64)).requires_grad_()
        cotangent = torch.randn(B, T, dim, generator=generator, dtype=torch.float64)

        y = mixer(x)
        params = dict(mixer.named_parameters())
        grads = torch.autograd.grad((y * cotangent).sum(), [x] + list(params.values()), allow_unused=True)

        weights = TrackedWeights({k: v.detach().clone().requires_grad_() for k, v in mixer.state_dict().items()})
        x_ref = x.detach().clone().requires_grad_()
        y_ref = reference(x_ref, weights, **options)
        self.assertEqual(weights.read, set(mixer.state_dict().keys()),
                         f"{spec}: the reference read {sorted(weights.read)}, the layer has "
                         f"{sorted(mixer.state_dict().keys())}")
        ref_leaves = [x_ref] + [dict.__getitem__(weights, name) for name in params]
        ref_grads = torch.autograd.grad((y_ref * cotangent).sum(), ref_leaves, allow_unused=True)

        worst = assert_close(self, y, y_ref, f"{spec} T={T}: output")
        for name, g, g_ref in zip(["x"] + list(params), grads, ref_grads):
            self.assertIsNotNone(g, f"{spec}: the layer gave {name} no gradient")
            self.assertIsNotNone(g_ref, f"{spec}: the reference gave {name} no gradient")
            worst = max(worst, assert_close(self, g, g_ref, f"{spec} T={T}: gradient of {name}"))
        key = spec.split(":")[0]
        MAX_DIFFERENCES[key] = max(MAX_DIFFERENCES.get(key, 0.0), worst)


class SoftmaxAttention(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, heads, rope, theta, bias, causal, scale)
            (24, 4, 1, 10000.0, 1, 1, 0.0),
            (24, 2, 1, 500.0, 1, 0, 0.0),
            (20, 2, 0, 10000.0, 0, 1, 0.37),
            (20, 5, 1, 10000.0, 1, 0, 0.8),
        ]
        for impl in ("fused", "naive", "torch"):
            for i, (dim, heads, rope, theta, bias, causal, scale) in enumerate(cases):
                for T in (7, 13):
                    spec = (f"softmax:heads={heads},rope={rope},rope_theta={theta},bias={bias},causal={causal},"
                            f"scale={scale},impl={impl}")
                    with self.subTest(spec=spec, T=T):
                        self.compare(spec, ref.softmax_mixer,
                                     dict(heads=heads, rope=bool(rope), rope_theta=theta, causal=bool(causal),
                                          scale=scale), dim, T, seed=i + 10 * T)


class ReluAttention(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, heads, rope, theta, bias, causal, eps)
            (24, 4, 1, 10000.0, 1, 1, 1e-12),
            (24, 2, 1, 300.0, 1, 0, 1e-12),
            (20, 2, 0, 10000.0, 0, 1, 0.3),   # an eps large enough to tell sqrt(|z|^2 + eps) from max(|z|, eps)
            (20, 4, 0, 10000.0, 1, 0, 2.0),
        ]
        for i, (dim, heads, rope, theta, bias, causal, eps) in enumerate(cases):
            for T in (7, 13):
                spec = f"relu:heads={heads},rope={rope},rope_theta={theta},bias={bias},causal={causal},eps={eps}"
                with self.subTest(spec=spec, T=T):
                    self.compare(spec, ref.relu_mixer,
                                 dict(heads=heads, rope=bool(rope), rope_theta=theta, causal=bool(causal), eps=eps),
                                 dim, T, seed=i + 10 * T)


class LinearAttention(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, heads, feature, eps, rope, theta, bias, causal)
            (24, 4, "relu", 1e-6, 0, 10000.0, 1, 1),
            (24, 4, "elu", 1e-6, 1, 10000.0, 1, 1),
            (24, 2, "relu", 0.05, 1, 700.0, 0, 0),   # an eps that shows in the features and the floor
            (20, 4, "elu", 1e-6, 0, 10000.0, 1, 0),
            (20, 2, "relu", 1e-6, 1, 10000.0, 1, 0),
        ]
        for impl in ("fused", "naive"):
            for i, (dim, heads, feature, eps, rope, theta, bias, causal) in enumerate(cases):
                for T in (7, 13):
                    spec = (f"linear:heads={heads},feature={feature},eps={eps},rope={rope},rope_theta={theta},"
                            f"bias={bias},causal={causal},impl={impl}")
                    with self.subTest(spec=spec, T=T):
                        self.compare(spec, ref.linear_mixer,
                                     dict(heads=heads, feature=feature, eps=eps, rope=bool(rope), rope_theta=theta,
                                          causal=bool(causal)), dim, T, seed=i + 10 * T)

    def test_normaliser_floor(self):
        """The floor max(normaliser, eps) binding: q is pushed far negative (phi(q) = eps in every feature) and the
        keys made small, so every normaliser eps * sum_j sum_f phi(k_j)_f is below eps (at most 0.6 eps here) and the
        read is numerator / eps."""
        D = 20
        small_normalisers = shrink_normalisers(D)

        for causal in (1, 0):
            spec = f"linear:heads=2,feature=relu,eps=0.001,rope=0,causal={causal},impl=naive"
            with self.subTest(spec=spec):
                self.compare(spec, ref.linear_mixer, dict(heads=2, feature="relu", eps=0.001, causal=bool(causal)),
                             D, 9, seed=3, adjust=small_normalisers)


class GatedLinearAttention(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, heads, feature, normalize, gate_normalizer, per_key, eps, rope, theta, bias)
            (24, 4, "relu", 1, 16.0, 0, 1e-6, 0, 10000.0, 1),
            (24, 4, "relu", 1, 16.0, 1, 1e-6, 0, 10000.0, 1),
            (24, 2, "elu", 1, 2.0, 0, 1e-6, 1, 10000.0, 1),
            (24, 2, "elu", 1, 2.0, 1, 1e-6, 1, 900.0, 0),
            (20, 4, "relu", 0, 4.0, 0, 0.01, 0, 10000.0, 1),
            (20, 2, "identity", 0, 1.0, 1, 1e-6, 1, 10000.0, 1),
            (20, 2, "identity", 0, 3.0, 0, 1e-6, 0, 10000.0, 0),
            (24, 4, "relu", 1, 0.5, 1, 0.02, 1, 10000.0, 1),
        ]
        for impl in ("fused", "naive"):
            for i, (dim, heads, feature, normalize, gn, per_key, eps, rope, theta, bias) in enumerate(cases):
                for T in (7, 13):
                    spec = (f"gla:heads={heads},feature={feature},normalize={normalize},gate_normalizer={gn},"
                            f"per_key={per_key},eps={eps},rope={rope},rope_theta={theta},bias={bias},impl={impl}")
                    with self.subTest(spec=spec, T=T):
                        self.compare(spec, ref.gla_mixer,
                                     dict(heads=heads, feature=feature, normalize=bool(normalize), gate_normalizer=gn,
                                          per_key=bool(per_key), eps=eps, rope=bool(rope), rope_theta=theta),
                                     dim, T, seed=i + 10 * T)

    def test_normaliser_floor(self):
        """The floor max(normaliser, eps) binding, as for linear attention: phi(q) = eps in every feature and small
        keys, so every decayed normaliser is below eps."""
        D = 20
        small_normalisers = shrink_normalisers(D)

        for impl in ("fused", "naive"):
            for per_key in (0, 1):
                spec = f"gla:heads=2,feature=relu,normalize=1,gate_normalizer=2,per_key={per_key},eps=0.001,impl={impl}"
                with self.subTest(spec=spec):
                    self.compare(spec, ref.gla_mixer, dict(heads=2, feature="relu", normalize=True, gate_normalizer=2.0,
                                                           per_key=bool(per_key), eps=0.001),
                                 D, 9, seed=4, adjust=small_normalisers)

    def test_long_sequence_crosses_the_fused_chunk(self):
        """The fused per-head scan works in chunks of 64: a sequence of 70 crosses a chunk boundary."""
        for per_key in (0, 1):
            spec = f"gla:heads=2,feature=relu,normalize=1,gate_normalizer=4,per_key={per_key},impl=fused"
            with self.subTest(spec=spec):
                self.compare(spec, ref.gla_mixer, dict(heads=2, feature="relu", normalize=True, gate_normalizer=4.0,
                                                       per_key=bool(per_key)), 8, 70, seed=5, max_len=80)


class DeltaRule(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, heads, rope, theta, bias)
            (24, 4, 0, 10000.0, 1),
            (24, 2, 1, 10000.0, 1),
            (20, 2, 1, 400.0, 0),
            (20, 5, 0, 10000.0, 1),
        ]
        for i, (dim, heads, rope, theta, bias) in enumerate(cases):
            for T in (7, 13):
                spec = f"delta:heads={heads},rope={rope},rope_theta={theta},bias={bias}"
                with self.subTest(spec=spec, T=T):
                    self.compare(spec, ref.delta_mixer, dict(heads=heads, rope=bool(rope), rope_theta=theta),
                                 dim, T, seed=i + 10 * T)


class SelectiveSSM(ReferenceCase):
    def test_against_reference(self):
        cases = [  # (dim, expand, state, conv, dt_rank)
            (24, 2, 4, 4, 0),     # dt_rank 0 = ceil(24 / 16) = 2
            (20, 1, 5, 3, 3),
            (24, 2, 3, 0, 0),     # no conv
            (20, 2, 6, 1, 1),
        ]
        for impl in ("fused", "naive"):
            for i, (dim, expand, state, conv, dt_rank) in enumerate(cases):
                for T in (7, 13):
                    spec = f"ssm:expand={expand},state={state},conv={conv},dt_rank={dt_rank},impl={impl}"
                    with self.subTest(spec=spec, T=T):
                        self.compare(spec, ref.ssm_mixer, dict(state=state, conv=conv, dt_rank=dt_rank),
                                     dim, T, seed=i + 10 * T)

    def test_long_sequence_crosses_the_fused_checkpoints(self):
        """The fused scan saves its state every 64 steps and recomputes from there in the backward."""
        spec = "ssm:expand=1,state=3,conv=2,dt_rank=1,impl=fused"
        self.compare(spec, ref.ssm_mixer, dict(state=3, conv=2, dt_rank=1), 8, 70, seed=6, max_len=80)


# ----------------------------------------------------------------------------------------------------------------
# Known values


def rotated_unit(a, p, theta, d):
    """R_p e_a by hand: channel a of a d-wide head rotated to position p. Pair i = (i, i + d/2) turns by
    p * theta^(-2i/d): e_i -> cos e_i + sin e_{i+d/2}, e_{i+d/2} -> -sin e_i + cos e_{i+d/2}."""
    half = d // 2
    i = a % half
    angle = p * theta ** (-2.0 * i / d)
    v = [0.0] * d
    if a < half:
        v[i], v[i + half] = math.cos(angle), math.sin(angle)
    else:
        v[i], v[i + half] = -math.sin(angle), math.cos(angle)
    return v


class RotaryKnownValues(unittest.TestCase):
    """seqmix's RoPE read out exactly through a gla mixer with identity-like weights.

    gla with feature=identity, normalize=0, no biases and the decay forced to 1 (decay.weight = 0,
    decay.bias = 1000: logsigmoid(1000) = 0 in float64) computes y_t = sum_{j<=t} (R_t q_t / sqrt(d)) . (R_j k_j) v_j.
    The input has a marker channel (1 at position s only) and a constant channel (1 everywhere). Head h's query is
    e_{a_h} (from the constant channel), its key e_{b_h} and value e_0 come from the marker, the output
    projection is the identity, so y_t[h*d] = (R_t e_{a_h}) . (R_s e_{b_h}) / sqrt(d) for t >= s and 0 before.
    Every RoPE'd mixer (softmax, relu, linear, gla, delta) applies RoPE through the same q/k projection."""

    D, HEADS = 32, 4
    d = D // HEADS
    T = 40

    def test_hand_formula_literals(self):
        """The hand formula itself, at literal values: theta=10000, d=8 gives inverse frequencies 1, 0.1, 0.01,
        0.001; theta=100 gives 1, 100^(-1/4) = 0.31622776601683794, 0.1, 0.031622776601683794."""
        self.assertEqual(rotated_unit(1, 5, 10000.0, 8)[1], math.cos(0.5))
        self.assertAlmostEqual(rotated_unit(1, 5, 10000.0, 8)[1], 0.8775825618903728, places=15)
        self.assertAlmostEqual(rotated_unit(1, 5, 10000.0, 8)[5], 0.479425538604203, places=15)
        self.assertAlmostEqual(rotated_unit(5, 5, 10000.0, 8)[1], -0.479425538604203, places=15)
        self.assertAlmostEqual(rotated_unit(1, 7, 100.0, 8)[1], -0.5994373929764008, places=15)
        self.assertAlmostEqual(rotated_unit(1, 7, 100.0, 8)[5], 0.8004216463225218, places=15)
        self.assertAlmostEqual(rotated_unit(0, 3, 100.0, 8)[4], math.sin(3.0), places=15)

    def read_rotation(self, theta, marker, pairs):
        """y[t, h] = (R_t e_a . R_marker e_b) / sqrt(d) for the (a, b) of each head h."""
        D, H, d, T = self.D, self.HEADS, self.d, self.T
        mixer = seqmix.Mixer(f"gla:heads={H},feature=identity,normalize=0,rope=1,rope_theta={theta},bias=0",
                             D, T).double()
        params = dict(mixer.named_parameters())
        with torch.no_grad():
            for p in params.values():
                p.zero_()
            params["decay.bias"].fill_(1000.0)
            w = params["qkv.weight"]                      # rows [q (D) | k (D) | v (D)], columns = input channels
            for h, (a, b) in enumerate(pairs):
                w[h * d + a, 1] = 1.0                     # q = e_a from the constant channel 1
                w[D + h * d + b, 0] = 1.0                 # k = e_b from the marker channel 0
                w[2 * D + h * d, 0] = 1.0                 # v = e_0 from the marker
            params["out.weight"].copy_(torch.eye(D, dtype=torch.float64))
        x = torch.zeros(1, T, D, dtype=torch.float64)
        x[0, marker, 0] = 1.0
        x[0, :, 1] = 1.0
        with torch.no_grad():
            y = mixer(x)[0]
        return y[:, [h * d for h in range(H)]]            # [T, H]

    def test_seqmix_rope_matches_hand_values(self):
        d = self.d
        combos = [(a, b) for a in range(d) for b in range(d)]
        worst = 0.0
        for theta in (10000.0, 100.0):
            for marker in (0, 3):
                for start in range(0, len(combos), self.HEADS):
                    pairs = combos[start:start + self.HEADS]
                    got = self.read_rotation(theta, marker, pairs)
                    for h, (a, b) in enumerate(pairs):
                        key = rotated_unit(b, marker, theta, d)
                        for t in range(self.T):
                            expected = 0.0
                            if t >= marker:
                                query = rotated_unit(a, t, theta, d)
                                expected = sum(u * v for u, v in zip(query, key)) / math.sqrt(d)
                            difference = abs(got[t, h].item() - expected)
                            worst = max(worst, difference)
                            self.assertLess(difference, 1e-12, f"theta={theta} key at {marker} q=e_{a} k=e_{b} "
                                                               f"t={t}: seqmix {got[t, h].item()!r}, hand {expected!r}")
        MAX_DIFFERENCES["rope (known values)"] = worst

    def test_reference_rope_matches_hand_values(self):
        """The reference's rotary(), which every mixer reference uses, on unit vectors at positions 0..T-1."""
        d = self.d
        eye = torch.eye(d, dtype=torch.float64)
        for theta in (10000.0, 100.0, 3.0):
            x = eye[None, None].expand(1, self.T, d, d).clone()       # [B=1, T, "heads" = d unit vectors, d]
            rotated = ref.rotary(x, theta)
            for t in range(self.T):
                for a in range(d):
                    expected = torch.tensor(rotated_unit(a, t, theta, d), dtype=torch.float64)
                    torch.testing.assert_close(rotated[0, t, a], expected, rtol=0, atol=1e-14)


class RMSNormKnownValues(unittest.TestCase):
    """RMSNorm has no Python binding of its own: it is read through the lm model (vocab 4, width 4, one block,
    channel=none, no head bias). Its embedding holds the test vectors and its head is the identity."""

    X = [[1.0, 2.0, 3.0, 4.0], [3e-3, -4e-3, 0.0, 0.0], [-2.0, 0.5, 0.0, 1.5], [0.0, 0.0, 0.0, 7.0]]
    WEIGHT = [1.0, 0.5, 2.0, -1.0]

    def model(self, final_norm):
        model = seqmix.Model(f"lm:dim=4,layers=1,channel=none,head_bias=0,final_norm={final_norm}",
                             ["softmax:heads=1,rope=0,bias=0"], vocab_size=4, seq_len=1).double()
        params = dict(model.named_parameters())
        with torch.no_grad():
            params["token_embedding.weight"].copy_(torch.tensor(self.X, dtype=torch.float64))
            params["output_head.weight"].copy_(torch.eye(4, dtype=torch.float64))
        return model, params

    def expected(self, row, weight):
        """x / sqrt(mean(x^2) + 1e-5) * weight, by hand."""
        mean_square = sum(v * v for v in row) / len(row)
        return [v / math.sqrt(mean_square + 1e-5) * w for v, w in zip(row, weight)]

    def test_final_norm(self):
        """The block adds 0 (the mixer's output projection is zero), so logits = final_norm(embedding)."""
        model, params = self.model(final_norm=1)
        with torch.no_grad():
            params["blocks.0.mixer.out.weight"].zero_()
            params["final_norm.weight"].copy_(torch.tensor(self.WEIGHT, dtype=torch.float64))
            logits = model(torch.arange(4).view(4, 1))[:, 0]       # [4 tokens, 4]
        # Literals: 1 / sqrt(7.5 + 1e-5) = 0.3651481282381064 for [1,2,3,4]; 1 / sqrt(6.25e-6 + 1e-5) =
        # 248.0694691784169 for [3e-3, -4e-3, 0, 0] (eps dominates the mean square there).
        literal = [[0.3651481282381064, 0.3651481282381064, 2.1908887694286383, -1.4605925129524255],
                   [0.7442084075352507, -0.9922778767136676 * 0.5, 0.0, 0.0]]
        torch.testing.assert_close(logits[:2], torch.tensor(literal, dtype=torch.float64), rtol=1e-13, atol=1e-15)
        for token, row in enumerate(self.X):
            torch.testing.assert_close(logits[token], torch.tensor(self.expected(row, self.WEIGHT), dtype=torch.float64),
                                       rtol=1e-13, atol=1e-15)
            torch.testing.assert_close(logits[token], ref.rms_norm(torch.tensor(row, dtype=torch.float64),
                                                                   torch.tensor(self.WEIGHT, dtype=torch.float64)),
                                       rtol=1e-13, atol=1e-15)

    def test_block_norm(self):
        """final_norm=0, one position: softmax over one key is 1, so with v = x and an identity output projection
        the block gives x + mixer_norm(x), and logits - x = mixer_norm(x)."""
        model, params = self.model(final_norm=0)
        weight = [0.5, -1.5, 1.0, 2.0]
        with torch.no_grad():
            qkv = params["blocks.0.mixer.qkv.weight"]          # [q | k | v] rows
            qkv.zero_()
            qkv[8:12].copy_(torch.eye(4, dtype=torch.float64))
            params["blocks.0.mixer.out.weight"].copy_(torch.eye(4, dtype=torch.float64))
            params["blocks.0.mixer_norm.weight"].copy_(torch.tensor(weight, dtype=torch.float64))
            logits = model(torch.arange(4).view(4, 1))[:, 0]
        for token, row in enumerate(self.X):
            torch.testing.assert_close(logits[token] - torch.tensor(row, dtype=torch.float64),
                                       torch.tensor(self.expected(row, weight), dtype=torch.float64),
                                       rtol=1e-12, atol=1e-14)


def tearDownModule():
    print("\nlargest |layer - reference| / max(1, scale), over outputs and gradients:")
    for key, value in sorted(MAX_DIFFERENCES.items()):
        print(f"  {key:22s} {value:.2e}")


if __name__ == "__main__":
    unittest.main()
