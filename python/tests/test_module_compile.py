"""seqmix's modules inside a user's nn.Module under torch.compile(fullgraph=True): every mixer, channel mixer and
model compiles without a graph break and equals eager (outputs and every gradient), a new sequence length does not
recompile under dynamic shapes, dropout and autocast behave as in eager; modules pickle, deep-copy and round-trip
through state_dict; the public classes subclass and isinstance-check; every operator passes torch.library.opcheck."""
import copy
import io
import os
import pickle
import tempfile
import unittest

import torch
import torch._dynamo
import torch._dynamo.testing

import seqmix
from op_samples import SAMPLES, WITHOUT_TENSOR_INPUTS, state_inputs, table_ops
from test_modules import MAX_LEN, mixer_specs, run_cli

DIM, T = 16, 10
TOKENS = dict(vocab_size=20, seq_len=T)
FEATURES = dict(input_features=4, output_features=4, seq_len=T)
MODEL_SIZES = {"lm": TOKENS, "autoencoder": TOKENS, "probe": FEATURES, "forecaster": dict(FEATURES, output_len=3),
               "dlinear": dict(FEATURES, output_len=3), "vit": dict(input_features=4, output_features=10, seq_len=T)}


def model_of(name):
    mixers = [] if name == "dlinear" else ["softmax:heads=2,causal=0"] if name == "vit" else ["softmax:heads=2"]
    return seqmix.Model(name, mixers, **MODEL_SIZES[name])


def inputs_of(name, batch=2, length=T):
    if "vocab_size" in MODEL_SIZES[name]:
        return torch.randint(0, 20, (batch, length))
    return torch.randn(batch, length, 4)


class Net(torch.nn.Module):
    """A user's module: PyTorch layers around a seqmix module."""

    def __init__(self, inner, dim=None):
        super().__init__()
        self.inner = inner
        self.head = torch.nn.Linear(dim, dim) if dim else torch.nn.Identity()

    def forward(self, x, **kwargs):
        y = self.head(self.inner(x, **kwargs))
        aux = self.inner.auxiliary_loss() if hasattr(self.inner, "auxiliary_loss") else None
        loss = y.float().square().mean()
        return y, (loss + aux) if aux is not None else loss


def run(net, x, seed=0, module=None, **kwargs):
    """(outputs, loss, gradient of x or None, gradients of the parameters of module, default net) of one forward
    and backward of net (module: the eager module a compiled net wraps)."""
    module = module or net
    module.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(x.is_floating_point())
    torch.manual_seed(seed)
    y, loss = net(x, **kwargs)
    loss.backward()
    return y.detach(), loss.detach(), x.grad, {n: p.grad for n, p in module.named_parameters()}


class ModulesCompile(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        torch.manual_seed(0)

    def assert_compiled_equals_eager(self, net, x, backend="aot_eager", atol=1e-6, rtol=1e-5, **kwargs):
        """Outputs and gradients within float32 rounding: the compiled backward recomputes the forward, and
        autograd may sum a gradient's contributions in another order."""
        eager = run(net, x, **kwargs)
        counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
        compiled = run(torch.compile(net, backend=counter, fullgraph=True, dynamic=True), x, module=net, **kwargs)
        self.assertEqual(counter.frame_count, 1)
        self.assertEqual(compiled[0].dtype, eager[0].dtype)
        for got, want in zip(compiled[:3], eager[:3]):
            self.assertEqual(got is None, want is None)
            if got is not None:
                torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
        self.assertEqual(set(compiled[3]), set(eager[3]))
        for name, want in eager[3].items():
            got = compiled[3][name]
            self.assertEqual(got is None, want is None, name)
            if want is not None:
                torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")

    def test_every_mixer_compiles_fullgraph_and_equals_eager(self):
        for spec in mixer_specs():
            with self.subTest(spec=spec):
                torch._dynamo.reset()
                self.assert_compiled_equals_eager(Net(seqmix.Mixer(spec, DIM, MAX_LEN), DIM), torch.randn(2, T, DIM))

    def test_every_channel_mixer_compiles_with_its_auxiliary_loss(self):
        for entry in seqmix.registry()["channel_mixers"]:
            if entry["name"] == "none":
                continue
            with self.subTest(spec=entry["name"]):
                torch._dynamo.reset()
                self.assert_compiled_equals_eager(Net(seqmix.ChannelMixer(entry["name"], DIM), DIM),
                                                  torch.randn(2, T, DIM))

    def test_every_model_compiles(self):
        self.assertEqual(set(MODEL_SIZES), {m["name"] for m in seqmix.registry()["models"]})
        for name in MODEL_SIZES:
            with self.subTest(model=name):
                torch._dynamo.reset()
                self.assert_compiled_equals_eager(Net(model_of(name)), inputs_of(name))

    def test_a_language_model_with_moe_and_dropout_compiles(self):
        """Dropout draws the same masks compiled as eager (the recompute starts from the forward's random state),
        and the MoE load-balance loss reaches the loss and its gradients."""
        model = seqmix.LanguageModel(vocab_size=20, mixers=["fem:prior=gla", "softmax:heads=2"], dim=DIM, layers=2,
                                     channel="(moe:experts=4)", dropout=0.3)
        self.assertTrue(model.training)
        self.assert_compiled_equals_eager(Net(model), inputs_of("lm"))

    def test_packed_and_masked_forms_compile(self):
        cu_seqlens = torch.tensor([0, 3, 4, 9, 12], dtype=torch.int64)
        for spec in ["softmax:heads=2", "fem:prior=gla", "fem:prior=softmax", "hyperglu:variant=G-cg-12o!"]:
            with self.subTest(spec=spec, form="packed"):
                torch._dynamo.reset()
                self.assert_compiled_equals_eager(Net(seqmix.Mixer(spec, DIM, MAX_LEN)), torch.randn(1, 12, DIM),
                                                  cu_seqlens=cu_seqlens)
            if not spec.startswith("fem"):
                continue  # FEM is the mixer that takes a padding mask
            with self.subTest(spec=spec, form="masked"):
                torch._dynamo.reset()
                mask = torch.ones(2, T, dtype=torch.bool)
                mask[1, 7:] = False
                self.assert_compiled_equals_eager(Net(seqmix.Mixer(spec, DIM, MAX_LEN)), torch.randn(2, T, DIM),
                                                  padding_mask=mask)
        with self.subTest(model="lm", form="packed"):
            torch._dynamo.reset()
            model = seqmix.LanguageModel(vocab_size=20, mixers=["gla:heads=2"], dim=DIM, layers=2)
            self.assert_compiled_equals_eager(Net(model), torch.randint(0, 20, (1, 12)), cu_seqlens=cu_seqlens)

    def test_new_sequence_lengths_do_not_recompile(self):
        net = Net(seqmix.LanguageModel(vocab_size=20, mixers=["fem:prior=softmax", "gla:heads=2"], dim=DIM), None)
        for dynamic, most in ((True, 1), (None, 2)):  # None: PyTorch marks the length dynamic on its second size
            with self.subTest(dynamic=dynamic):
                torch._dynamo.reset()
                counter = torch._dynamo.testing.CompileCounter()
                compiled = torch.compile(net, backend=counter, fullgraph=True, dynamic=dynamic)
                for length in (8, 12, 17, 30):
                    tokens = torch.randint(0, 20, (2, length))
                    torch.testing.assert_close(compiled(tokens)[0], net(tokens)[0], atol=0, rtol=0)
                self.assertLessEqual(counter.frame_count, most)

    def test_inductor_compiles_a_model_of_mixers(self):
        """The default backend (inductor: its own kernels for the PyTorch layers around the seqmix operators)."""
        torch._dynamo.reset()
        net = Net(torch.nn.Sequential(seqmix.Mixer("fem:prior=softmax", DIM, MAX_LEN), torch.nn.GELU(),
                                      seqmix.Mixer("gla:heads=2", DIM, MAX_LEN)), DIM)
        x = torch.randn(2, T, DIM)
        eager = run(net, x)
        compiled = run(torch.compile(net, fullgraph=True), x, module=net)
        torch.testing.assert_close(compiled[0], eager[0], atol=1e-5, rtol=1e-5)
        for name, want in eager[3].items():
            torch.testing.assert_close(compiled[3][name], want, atol=1e-5, rtol=1e-5)

    def test_compiled_steps_under_autocast_read_the_updated_weights(self):
        """Training steps compiled under bf16 autocast, the backward (the recompute) outside it, as a training loop
        runs them: every step's loss equals the eager loop's, so each forward reads the weights of the last update."""
        def losses(compiled):
            torch.manual_seed(0)
            net = Net(seqmix.Mixer("gla:heads=2", DIM, MAX_LEN), DIM)
            step = torch.compile(net, backend="aot_eager", fullgraph=True) if compiled else net
            opt = torch.optim.SGD(net.parameters(), lr=0.5)
            x = torch.randn(2, T, DIM)
            out = []
            for _ in range(4):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    _, loss = step(x)
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
            return out

        torch._dynamo.reset()
        eager, compiled = losses(False), losses(True)
        self.assertEqual(len(set(eager)), 4)  # the weights move
        for a, b in zip(compiled, eager):
            self.assertAlmostEqual(a, b, delta=1e-5 * abs(b))

    def test_autocast_compiles_with_eager_dtypes(self):
        """Under bf16 autocast the compiled forward casts as eager does: same output dtype, same values."""
        nets = [("mixer " + spec, Net(seqmix.Mixer(spec, DIM, MAX_LEN), DIM), torch.randn(2, T, DIM))
                for spec in mixer_specs()]
        nets += [("model " + name, Net(model_of(name)), inputs_of(name)) for name in MODEL_SIZES]
        nets += [("channel moe", Net(seqmix.ChannelMixer("moe:experts=4", DIM), DIM), torch.randn(2, T, DIM))]
        for label, net, x in nets:
            with self.subTest(net=label):
                torch._dynamo.reset()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    self.assert_compiled_equals_eager(net, x)

    def test_a_compiled_module_outliving_its_module_is_an_error(self):
        mixer = seqmix.Mixer("softmax:heads=2", DIM, MAX_LEN)
        handle = mixer._handle
        del mixer
        with self.assertRaisesRegex(RuntimeError, "no longer exists"):
            torch.ops.seqmix.module_forward(handle, torch.randn(1, 4, DIM), None, 0, [], [], torch.float32, None)


def every_kind():
    """One module of each public kind, with something to feed it."""
    yield "mixer", seqmix.Mixer("fem:prior=gla", DIM, MAX_LEN), torch.randn(2, T, DIM)
    yield "channel", seqmix.ChannelMixer("moe:experts=4", DIM), torch.randn(2, T, DIM)
    for name in MODEL_SIZES:
        yield "model " + name, model_of(name), inputs_of(name)
    yield "language model", seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2"], dim=DIM,
                                                 pos="learned", max_len=T), inputs_of("lm")


class ModulesCopy(unittest.TestCase):
    def assert_same_module(self, original, copied, x):
        self.assertIs(type(copied), type(original))
        self.assertEqual(copied.training, original.training)
        self.assertEqual(list(dict(copied.named_parameters())), list(dict(original.named_parameters())))
        for (name, a), b in zip(original.state_dict().items(), copied.state_dict().values()):
            self.assertEqual(a.dtype, b.dtype, name)
            torch.testing.assert_close(a, b, atol=0, rtol=0)
            self.assertNotEqual(a.data_ptr(), b.data_ptr(), f"{name} shares memory with the original")
        with torch.no_grad():
            torch.testing.assert_close(copied(x), original(x), atol=0, rtol=0)
        # The copy's C++ module reads the copy's tensors: changing them changes its forward, not the original's.
        before = original(x).detach()
        with torch.no_grad():
            for p in copied.parameters():
                p.add_(0.5)
        self.assertFalse(torch.equal(copied(x).detach(), before))
        torch.testing.assert_close(original(x).detach(), before, atol=0, rtol=0)

    def test_every_kind_pickles_and_deep_copies(self):
        for kind, module, x in every_kind():
            module.eval()
            for how, make in (("pickle", lambda m: pickle.loads(pickle.dumps(m))), ("deepcopy", copy.deepcopy)):
                with self.subTest(kind=kind, how=how):
                    self.assert_same_module(module, make(module), x)

    def test_a_shallow_copy_shares_the_tensors(self):
        """copy.copy of an nn.Module shares its parameter tables: the copy reads (and changes) the same tensors."""
        module = seqmix.Mixer("gla:heads=2", DIM, MAX_LEN).eval()
        copied = copy.copy(module)
        x = torch.randn(2, T, DIM)
        torch.testing.assert_close(copied(x), module(x), atol=0, rtol=0)
        with torch.no_grad():
            for p in copied.parameters():
                p.add_(0.5)
        torch.testing.assert_close(copied(x), module(x), atol=0, rtol=0)

    def test_torch_save_and_load_a_whole_module(self):
        module = seqmix.LanguageModel(vocab_size=20, mixers=["gla:heads=2"], dim=DIM).eval()
        buffer = io.BytesIO()
        torch.save(module, buffer)
        buffer.seek(0)
        self.assert_same_module(module, torch.load(buffer, weights_only=False), inputs_of("lm"))

    def test_copies_keep_dtype_frozen_parameters_and_a_subclass_state(self):
        class Scaled(seqmix.Mixer):
            def __init__(self):
                super().__init__("softmax:heads=2", DIM, MAX_LEN)
                self.scale = torch.nn.Parameter(torch.tensor(2.0))
                self.note = "mine"

            def forward(self, x):
                return super().forward(x) * self.scale

        module = Scaled().to(torch.bfloat16)
        frozen, trained = module._slots.parameter_names[:2]  # two of the C++ module's parameters
        module.get_parameter(frozen).requires_grad_(False)
        copied = copy.deepcopy(module)
        self.assertEqual(copied.note, "mine")
        self.assertEqual(copied.scale.dtype, torch.bfloat16)
        self.assertFalse(copied.get_parameter(frozen).requires_grad)
        self.assertTrue(copied.get_parameter(trained).requires_grad)
        x = torch.randn(2, T, DIM, dtype=torch.bfloat16)
        torch.testing.assert_close(copied(x), module(x), atol=0, rtol=0)
        copied(x).float().sum().backward()
        self.assertIsNone(copied.get_parameter(frozen).grad)
        self.assertIsNotNone(copied.get_parameter(trained).grad)
        self.assertIsNotNone(copied.scale.grad)

    def test_a_loaded_run_model_pickles(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run")
            run_cli("train", "--task", "mad.in_context_recall:seq_len=16,num_train=64,num_test=40", "--mixer",
                    "softmax:heads=2", "--steps", "2", "--batch-size", "8", "--eval-every", "2", "--threads", "1",
                    "--out", out)
            model = seqmix.load_run(out).model
            self.assertIsInstance(model, seqmix.LanguageModel)
            tokens = torch.randint(0, 8, (2, 16))
            self.assert_same_module(model, pickle.loads(pickle.dumps(model)), tokens)

    def test_state_dict_into_a_fresh_module(self):
        for kind, module, x in every_kind():
            with self.subTest(kind=kind):
                fresh = copy.deepcopy(module)  # same construction, then different weights
                with torch.no_grad():
                    for p in fresh.parameters():
                        p.normal_()
                fresh.load_state_dict(module.state_dict())
                module.eval(), fresh.eval()
                with torch.no_grad():
                    torch.testing.assert_close(fresh(x), module(x), atol=0, rtol=0)


class PublicClasses(unittest.TestCase):
    def test_public_modules_are_classes_to_subclass_and_check(self):
        model = seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2"], dim=DIM)
        for cls in (seqmix.LanguageModel, seqmix.Model, torch.nn.Module):
            self.assertIsInstance(model, cls)
        for name in ("Mixer", "ChannelMixer", "Model", "LanguageModel", "Run", "Tokenizer"):
            self.assertIsInstance(getattr(seqmix, name), type, name)

        class WithHead(seqmix.LanguageModel):
            def __init__(self):
                super().__init__(vocab_size=20, mixers=["gla:heads=2"], dim=DIM)
                self.extra = torch.nn.Linear(20, 1)

            def forward(self, tokens):
                return self.extra(super().forward(tokens))

        net = WithHead()
        self.assertIsInstance(net, seqmix.LanguageModel)
        out = net(inputs_of("lm"))
        self.assertEqual(out.shape, (2, T, 1))
        out.sum().backward()
        self.assertTrue(all(p.grad is not None for p in net.parameters()))
        torch._dynamo.reset()
        compiled = torch.compile(net, backend="aot_eager", fullgraph=True)
        torch.testing.assert_close(compiled(inputs_of("lm")).shape, out.shape)


class EveryOperatorPassesOpcheck(unittest.TestCase):
    def test_opcheck_every_operator(self):
        """torch.library.opcheck: the schema (no mutation or aliasing it does not declare), the fake (Meta)
        kernel's shapes and dtypes against the real kernel, the autograd registration, and AOTAutograd with
        dynamic shapes, for every operator of the op table and each implementation."""
        for name, impls in sorted(table_ops().items()):
            if name in WITHOUT_TENSOR_INPUTS:
                continue
            op = getattr(torch.ops.seqmix, name).default
            for impl in impls or [None]:
                with self.subTest(op=name, impl=impl):
                    torch.manual_seed(0)
                    sample = list(SAMPLES[name]())
                    states = state_inputs(name)
                    args = [x.requires_grad_() if isinstance(x, torch.Tensor) and x.is_floating_point()
                            and i not in states else x for i, x in enumerate(sample)]
                    torch.library.opcheck(op, tuple(args), {"impl": impl} if impl else {})

    def test_opcheck_the_module_operators(self):
        mixer = seqmix.Mixer("fem:prior=gla", DIM, MAX_LEN)
        parameters, buffers = mixer._slots.resolve()
        x = torch.randn(2, T, DIM, requires_grad=True)
        torch.library.opcheck(torch.ops.seqmix.module_forward.default,
                              (mixer._handle, x, None, 0, parameters, buffers, torch.float32, None))


if __name__ == "__main__":
    unittest.main()
