"""seqmix's ELA mixer, channel mixers (swiglu, mlp, moe), residual schemes (prenorm, hyperlink with the Memory
Lobe, momentum, nesterov) and the `lm` block stack against the independent plain-PyTorch reference
python/reference/ela_blocks_reference.py, in float64 on the same (re-randomised) weights: the outputs, the MoE
load-balance loss, and the gradients with respect to the input and every parameter."""
import unittest

import torch

import closeness
import ela_blocks_reference as ref
import seqmix

MAX_DIFF = {}  # group -> largest |C++ - reference| seen (printed at the end of the run)


class Recording(dict):
    """The weights by C++ name; remembers which ones the reference read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.used = set()

    def __getitem__(self, key):
        self.used.add(key)
        return super().__getitem__(key)


def randomise(module, generator):
    """Every parameter re-drawn so that no term is switched off by its initial value (zero biases, unit norm
    gains, beta = 0.9 and eta = 1 everywhere): weights ~ N(0, 1/fan_in), embeddings ~ N(0, 1), biases ~ 0.2 N,
    norm gains ~ 1 + 0.2 N, beta ~ U(0.5, 0.95), eta ~ U(0.7, 1.3)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            n = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            u = torch.rand(p.shape, generator=generator, dtype=p.dtype)
            if leaf == "beta":
                p.copy_(0.5 + 0.45 * u)
            elif leaf == "eta":
                p.copy_(0.7 + 0.6 * u)
            elif "norm" in name and leaf == "weight":
                p.copy_(1.0 + 0.2 * n)
            elif leaf in ("bias", "head_bias") or "norm" in name:
                p.copy_(0.2 * n)
            elif "embedding" in name or leaf == "label":
                p.copy_(n)
            else:
                p.copy_(n / p.shape[-1] ** 0.5)


def spec_of(name, options):
    """"name:k=v,..." with flags written 0/1 (options with value None are left at their defaults)."""
    parts = [f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in options.items() if v is not None]
    return name + (":" + ",".join(parts) if parts else "")


class ReferenceCase(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.generator = torch.Generator().manual_seed(1234)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.generator, dtype=torch.float64)

    def assert_close(self, got, want, what, group):
        self.assertIsNotNone(got, f"{what}: no gradient on the C++ side")
        self.assertIsNotNone(want, f"{what}: no gradient in the reference")
        diff = closeness.assert_close(self, got, want, what)
        MAX_DIFF[group] = max(MAX_DIFF.get(group, 0.0), diff)

    def compare(self, module, inputs, reference, group, float_input=True, with_aux=False, adjust=None):
        """module(inputs) against reference(inputs, weights) -> y or (y, aux): outputs, aux loss, gradients of
        <y, g> (and of the aux loss) with respect to the input and every parameter. adjust(state_dict) may edit
        the re-randomised weights in place."""
        randomise(module, self.generator)
        if adjust is not None:
            with torch.no_grad():
                adjust(module.state_dict())
        params = dict(module.named_parameters())
        names = list(params)
        x = inputs.clone().requires_grad_(float_input)
        y = module(x)
        g = self.randn(*y.shape)
        wrt = ([x] if float_input else []) + [params[n] for n in names]
        got = torch.autograd.grad(y, wrt, g, allow_unused=True, retain_graph=with_aux)
        got_aux = module.auxiliary_loss() if with_aux else None

        weights = Recording({n: p.detach().clone().requires_grad_() for n, p in params.items()})
        xr = inputs.clone().requires_grad_(float_input)
        out = reference(xr, weights)
        yr, aux = out if isinstance(out, tuple) else (out, None)
        self.assertEqual(weights.used, set(module.state_dict().keys()), "the weights the reference read")
        wrt_r = ([xr] if float_input else []) + [weights[n] for n in names]
        want = torch.autograd.grad(yr, wrt_r, g, allow_unused=True, retain_graph=with_aux)

        self.assert_close(y.detach(), yr.detach(), "output", group)
        labels = (["input"] if float_input else []) + names
        for label, a, b in zip(labels, got, want):
            if a is None and ".experts." in label:  # an expert no token was routed to: its gradient is zero
                self.assertFalse(b.abs().gt(0).any(), f"gradient of {label}: the reference routes a token to it")
                continue
            self.assert_close(a, b, f"gradient of {label}", group)
        if with_aux:
            self.assertIsNotNone(got_aux, "the C++ layer reports no auxiliary loss")
            self.assertIsNotNone(aux, "the reference computes no auxiliary loss")
            self.assert_close(got_aux.detach(), aux.detach(), "auxiliary loss", group)
            got = torch.autograd.grad(got_aux, wrt, allow_unused=True)
            want = torch.autograd.grad(aux, wrt_r, allow_unused=True)
            compared = set()
            for label, a, b in zip(labels, got, want):
                if b is None or not b.abs().gt(0).any():  # expert weights: the loss does not read them
                    self.assertTrue(a is None or not a.abs().gt(0).any(), f"aux gradient of {label}")
                    continue
                self.assert_close(a, b, f"aux-loss gradient of {label}", group)
                compared.add(label)
            routers = {n for n in names if n.endswith("router.weight") or n.endswith("router.bias")}
            self.assertTrue(routers and routers <= compared, f"aux-loss gradients compared: {sorted(compared)}")
        return y, yr


# ------------------------------------------------------------------------------------------------------------------
class ExactLinearAttention(ReferenceCase):
    KERNELS = ["hadamard_exp", "sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude"]

    def check(self, dim, T, adjust=None, **options):
        spec = spec_of("ela", options)
        with self.subTest(spec=spec, dim=dim, T=T):
            mixer = seqmix.Mixer(spec, dim, 16).double()
            kwargs = {k: bool(v) if k in ("causal", "rope", "bias", "out") else v for k, v in options.items()}
            x = self.randn(2, T, dim)
            self.compare(mixer, x, lambda x, w: ref.ela_mixer(x, w, **kwargs), "ela", adjust=adjust)
            return mixer, x, kwargs

    def test_every_kernel_causal_and_bidirectional_with_rope(self):
        for kernel in self.KERNELS:
            for causal in (1, 0):
                self.check(24, 7, kernel=kernel, causal=causal, heads=4)
                self.check(20, 13, kernel=kernel, causal=causal, heads=2)

    def test_options_scale_bias_out_rope(self):
        for kernel in self.KERNELS:
            self.check(24, 13, kernel=kernel, heads=4, scale=0.6, bias=1, out=0)
            self.check(24, 7, kernel=kernel, heads=2, causal=0, bias=1, rope_theta=37.5)
            self.check(20, 7, kernel=kernel, heads=2, rope=0, scale=1.3)

    def test_the_row_sum_floor(self):
        # eps large enough to bind on some rows, not all, of the polynomial kernels (rows are >= 1 for Hadamard
        # Exp after its shift, so the floor is tested where it can act); q and k are scaled down to make rows small.
        for kernel in ["sum_sq_euclidean", "sub_sq_euclidean", "direction_magnitude"]:
            for causal in (1, 0):
                checked = self.check(24, 7, kernel=kernel, heads=4, causal=causal, scale=0.5, eps=15.0, out=0)
                if checked is None:  # the comparison failed (reported by its subTest)
                    continue
                mixer, x, kwargs = checked
                w = {n: p.detach() for n, p in mixer.state_dict().items()}
                floored = ref.ela_mixer(x, w, **kwargs)
                free = ref.ela_mixer(x, w, **{**kwargs, "eps": 1e-8})
                changed = (floored - free).abs() > 1e-12  # [B,T,D]: per head (no output projection)
                self.assertTrue(changed.any() and not changed.all(), f"the floor binds on {changed.double().mean():.2f} of the entries")

    def test_direction_magnitude_at_a_zero_query_and_key(self):
        # |x| = sqrt(||x||^2 + 1e-12) is what keeps the kernel differentiable at 0: head 0 gets q = 0 and head 1
        # k = 0 (their rows of W_qkv zeroed, no bias), where the floor is the whole norm.
        def zero_rows(state, d=6, D=24):
            state["qkv.weight"][0:d] = 0.0
            state["qkv.weight"][D + d:D + 2 * d] = 0.0

        for causal in (1, 0):
            self.check(24, 7, adjust=zero_rows, kernel="direction_magnitude", heads=4, causal=causal)


# ------------------------------------------------------------------------------------------------------------------
class ChannelMixers(ReferenceCase):
    def test_swiglu(self):
        for dim, hidden in [(24, None), (20, 36)]:
            with self.subTest(dim=dim, hidden=hidden):
                layer = seqmix.ChannelMixer(spec_of("swiglu", {"hidden": hidden}), dim).double()
                if hidden is None:  # the documented default: 8/3 width rounded up to 16
                    self.assertEqual(tuple(layer.state_dict()["w1.weight"].shape), (64, 24))
                self.compare(layer, self.randn(2, 7, dim), lambda x, w: ref.swiglu(x, w), "swiglu/mlp")

    def test_mlp(self):
        for dim, options in [(24, {}), (20, {"hidden": 36, "bias": 0})]:
            with self.subTest(dim=dim, options=options):
                layer = seqmix.ChannelMixer(spec_of("mlp", options), dim).double()
                if not options:  # the documented default: 4 x width
                    self.assertEqual(tuple(layer.state_dict()["fc1.weight"].shape), (96, 24))
                bias = bool(options.get("bias", 1))
                self.compare(layer, self.randn(2, 13, dim), lambda x, w: ref.mlp(x, w, bias=bias), "swiglu/mlp")

    def test_moe(self):
        cases = [
            {},
            {"experts": 4, "top_k": 1},
            {"experts": 5, "top_k": 3, "label": "inner", "hidden": 16},
            {"experts": 3, "top_k": 2, "label": "none", "aux": 0.25, "skip": 1},
            {"experts": 4, "top_k": 2, "label": "outer", "label_source": "separate"},
            {"experts": 4, "top_k": 2, "label": "inner", "label_source": "separate", "skip": 1},
        ]
        defaults = {"experts": 4, "top_k": 2, "label": "outer", "label_source": "router", "aux": 0.01, "skip": 0}
        for options in cases:
            for dim, T in [(24, 7), (20, 13)]:
                with self.subTest(options=options, dim=dim):
                    layer = seqmix.ChannelMixer(spec_of("moe", options), dim).double()
                    kw = {**defaults, **{k: v for k, v in options.items() if k != "hidden"}}
                    kw["skip"] = bool(kw["skip"])
                    self.compare(layer, self.randn(2, T, dim), lambda x, w: ref.moe(x, w, **kw), "moe", with_aux=True)


# ------------------------------------------------------------------------------------------------------------------
V = 11


class LanguageModelBlocks(ReferenceCase):
    """seqmix.Model("lm:...") with ELA mixers against ref.language_model on the same weights."""

    def check(self, T, mixers, model=None, channel=("swiglu", {}), residual=("prenorm", {}), seq_len=16):
        model = dict(model or {})
        model.setdefault("dim", 24)
        model.setdefault("layers", 2)
        spec_parts = {**model}
        if channel is None:
            spec_parts["channel"] = "none"
        elif channel[1]:
            spec_parts["channel"] = "(" + spec_of(*channel) + ")"
        else:
            spec_parts["channel"] = channel[0]
        spec_parts["residual"] = "(" + spec_of(*residual) + ")" if residual[1] else residual[0]
        spec = spec_of("lm", spec_parts)
        mixer_specs = [spec_of("ela", m) for m in mixers]
        with self.subTest(spec=spec, mixers=mixer_specs, T=T):
            lm = seqmix.Model(spec, mixers=mixer_specs, vocab_size=V, seq_len=seq_len).double()
            tokens = torch.randint(0, V, (2, T), generator=self.generator)
            flags = ("causal", "rope", "bias", "out")
            ela_kw = [{k: bool(v) if k in flags else v for k, v in m.items()} for m in mixers]
            ch = None
            if channel is not None:
                ch = {"name": channel[0], **channel[1]}
                if ch["name"] == "moe":
                    ch.pop("hidden", None)
                    ch = {"experts": 4, "top_k": 2, "label": "outer", "label_source": "router", "aux": 0.01,
                          "skip": False, **ch}
                    ch["skip"] = bool(ch["skip"])
                elif ch["name"] == "mlp":
                    ch = {"name": "mlp", "bias": bool(ch.get("bias", 1))}
                else:
                    ch = {"name": ch["name"]}
            res = {"name": residual[0], **residual[1]}
            if "skip" in res:
                res["skip"] = bool(res["skip"])
            kw = dict(layers=model["layers"], mixers=ela_kw, channel=ch, norm_kind=model.get("norm", "rms"),
                      residual=res, final_norm=bool(model.get("final_norm", 1)), tie=bool(model.get("tie", 0)),
                      head_bias=bool(model.get("head_bias", 1)), pos=model.get("pos", "none"))
            with_aux = ch is not None and ch["name"] == "moe"

            def reference(x, w):
                logits, aux = ref.language_model(x, w, **kw)
                return (logits, aux) if with_aux else logits

            self.compare(lm, tokens, reference, "lm/" + residual[0], float_input=False, with_aux=with_aux)

    ELA2 = [{"heads": 4}, {"heads": 2, "kernel": "direction_magnitude"}]

    def test_prenorm_block_and_model_options(self):
        self.check(7, self.ELA2)
        self.check(13, [{"heads": 4, "kernel": "sum_sq_euclidean"}], model={"layers": 3},
                   channel=("mlp", {}))
        self.check(7, self.ELA2, model={"norm": "layer", "tie": 1, "head_bias": 1, "pos": "learned"})
        self.check(13, self.ELA2, model={"tie": 1, "head_bias": 0, "final_norm": 0, "pos": "learned"}, seq_len=13)
        self.check(7, [{"heads": 2, "causal": 0}], model={"head_bias": 0, "dim": 20}, channel=None)
        self.check(13, self.ELA2, channel=("moe", {"experts": 4, "top_k": 2}))

    def test_hyperlink_and_memory_lobe(self):
        for lobe in ["none", "causal", "bidirectional", "auto"]:
            self.check(7, self.ELA2, residual=("hyperlink", {"lobe": lobe}))
        self.check(13, self.ELA2, residual=("hyperlink", {"lobe": "causal", "skip": 0,
                                                          "lobe_kernel": "sum_sq_euclidean"}))
        self.check(7, [{"heads": 4, "causal": 0}], residual=("hyperlink", {"lobe": "auto"}))
        self.check(7, [{"heads": 4}], residual=("hyperlink", {"lobe": "causal"}), channel=None)
        # The ELA-GPT configuration (docs/ela.md), scaled down: MoE top-2, causal lobe, no final norm, tied head.
        self.check(13, [{"heads": 4}], model={"final_norm": 0, "tie": 1, "head_bias": 0},
                   channel=("moe", {"experts": 4, "top_k": 2}), residual=("hyperlink", {"lobe": "causal"}))

    def test_momentum(self):
        self.check(7, self.ELA2, residual=("momentum", {}))
        self.check(13, self.ELA2, residual=("momentum", {"share": "layer"}))
        self.check(7, self.ELA2, residual=("momentum", {"share": "global", "norm": "post"}))
        self.check(7, self.ELA2, residual=("momentum", {"norm": "post"}), model={"norm": "layer"})
        self.check(7, [{"heads": 4}], residual=("momentum", {}), channel=None, model={"layers": 3})
        self.check(13, self.ELA2, residual=("momentum", {}), channel=("moe", {"experts": 3, "top_k": 1}))

    def test_nesterov(self):
        self.check(7, self.ELA2, residual=("nesterov", {}))
        self.check(13, self.ELA2, residual=("nesterov", {"share": "layer", "norm": "post"}))
        self.check(7, self.ELA2, residual=("nesterov", {"share": "global"}))
        self.check(7, [{"heads": 4}], residual=("nesterov", {}), channel=None, model={"layers": 3})


def tearDownModule():
    for group, diff in sorted(MAX_DIFF.items()):
        print(f"  max |C++ - reference| / max(1, |reference|), {group}: {diff:.2e}")


if __name__ == "__main__":
    unittest.main()
