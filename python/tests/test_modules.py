"""seqmix's C++ modules as torch.nn.Modules: every registry entry builds and trains from Python, its parameters
are real nn.Parameters that the C++ forward reads at each call (test_parameter_tools.py: every tool that replaces
them), causal mixers decode token by token, and a `seqmix train` run loads into Python with the loss and the samples
the CLI gives."""
import json
import math
import os
import subprocess
import tempfile
import unittest

import torch

import seqmix

DIM, MAX_LEN, T = 16, 16, 10
# Registry names whose defaults at width 16 leave softmax's budget no room (they build the smallest layer of their
# label, with a warning); the over-budget labels say so in their name.
SMALL = {"hypermlp": "hypermlp:variant=R-cg-12o!", "hyperglu": "hyperglu:variant=G-cg-12o!"}


def mixer_specs():
    return [SMALL.get(m["name"], m["name"]) for m in seqmix.registry()["mixers"]]


def run_cli(*args):
    """The seqmix program's output (SEQMIX_BINARY, set by ctest); a failure raises with its stderr."""
    binary = os.environ.get("SEQMIX_BINARY")
    if not binary or not os.path.exists(binary):
        raise AssertionError("SEQMIX_BINARY is not set to the seqmix program")
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"seqmix {' '.join(args)} failed: {done.stderr}")
    return done.stdout


class EveryRegistryEntry(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_every_mixer_runs_forward_and_backward(self):
        for spec in mixer_specs():
            with self.subTest(spec=spec):
                mixer = seqmix.Mixer(spec, DIM, MAX_LEN)
                x = torch.randn(2, T, DIM, requires_grad=True)
                y = mixer(x)
                self.assertEqual(y.shape, x.shape)
                self.assertTrue(torch.isfinite(y).all())
                y.square().mean().backward()
                self.assertTrue(torch.isfinite(x.grad).all())
                params = dict(mixer.named_parameters())
                self.assertGreater(len(params), 0)
                with_grad = [n for n, p in params.items() if p.grad is not None]
                self.assertEqual(sorted(with_grad), sorted(params), "parameters without a gradient")

    def test_causal_mixers_prefill_then_steps_equal_the_forward(self):
        for spec in mixer_specs():
            mixer = seqmix.Mixer(spec, DIM, MAX_LEN).double()
            if not mixer.is_causal:
                continue
            with self.subTest(spec=spec), torch.no_grad():
                x = torch.randn(2, T, DIM, dtype=torch.float64)
                full = mixer(x)
                state = mixer.init_state(2)
                prefix = 4
                outs = [mixer.prefill(x[:, :prefix], state)]
                outs += [mixer.step(x[:, t], state).unsqueeze(1) for t in range(prefix, T)]
                torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-9, rtol=1e-9)

    def test_every_channel_mixer(self):
        for entry in seqmix.registry()["channel_mixers"]:
            if entry["name"] == "none":  # the registry's "no channel mixer" (a model option)
                continue
            with self.subTest(spec=entry["name"]):
                channel = seqmix.ChannelMixer(entry["name"], DIM)
                x = torch.randn(2, T, DIM, requires_grad=True)
                y = channel(x)
                self.assertEqual(y.shape, x.shape)
                loss = y.square().mean()
                aux = channel.auxiliary_loss()
                if aux is not None:
                    loss = loss + aux
                loss.backward()
                self.assertTrue(all(p.grad is not None for p in channel.parameters()))

    def test_every_residual_scheme_in_a_language_model(self):
        for entry in seqmix.registry()["residuals"]:
            with self.subTest(residual=entry["name"]):
                model = seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2"], dim=DIM, layers=2,
                                             residual=entry["name"])
                tokens = torch.randint(0, 20, (2, T))
                logits = model(tokens)
                self.assertEqual(logits.shape, (2, T, 20))
                torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
                self.assertTrue(all(p.grad is not None for p in model.parameters()))

    def test_every_model(self):
        """Each model of the registry, sized as its kind of task sizes it (tokens, or real-valued features)."""
        tokens = dict(vocab_size=20, seq_len=T)
        features = dict(input_features=4, output_features=4, seq_len=T)
        sizes = {"lm": tokens, "autoencoder": tokens, "probe": features, "forecaster": dict(features, output_len=3),
                 "dlinear": dict(features, output_len=3), "vit": dict(input_features=4, output_features=10, seq_len=T)}
        self.assertEqual(set(sizes), {m["name"] for m in seqmix.registry()["models"]})
        for name, size in sizes.items():
            with self.subTest(model=name):
                mixers = [] if name == "dlinear" else ["softmax:heads=2,causal=0"] if name == "vit" else ["softmax:heads=2"]
                model = seqmix.Model(name, mixers, **size)
                inputs = torch.randint(0, 20, (2, T)) if "vocab_size" in size else torch.randn(2, T, 4)
                out = model(inputs)
                self.assertTrue(torch.isfinite(out).all())
                out.square().mean().backward()
                self.assertTrue(all(p.grad is not None for p in model.parameters()), name)

    def test_a_language_model_decodes_as_it_forwards(self):
        model = seqmix.LanguageModel(vocab_size=20, mixers=["fem:prior=gla", "softmax:heads=2"], dim=DIM,
                                     layers=2).double().eval()
        tokens = torch.randint(0, 20, (2, T))
        with torch.no_grad():
            full = model(tokens)
            state = model.init_state(2)
            steps = torch.stack([model.step(tokens[:, t], state) for t in range(T)], 1)
        torch.testing.assert_close(steps, full, atol=1e-9, rtol=1e-9)

    def test_bad_specs_are_one_line_errors(self):
        with self.assertRaisesRegex(RuntimeError, "unknown mixer 'nope'"):
            seqmix.Mixer("nope", DIM)
        with self.assertRaisesRegex(RuntimeError, "heads"):
            seqmix.Mixer("softmax:heads=3", DIM)
        with self.assertRaisesRegex(RuntimeError, "dim must be >= 1"):
            seqmix.Mixer("softmax", 0)
        with self.assertRaisesRegex(RuntimeError, "no channel mixer"):
            seqmix.ChannelMixer("none", DIM)
        with self.assertRaisesRegex(RuntimeError, "needs an lm model"):
            seqmix.Model("probe", ["softmax:heads=2"], input_features=4, output_features=4, seq_len=T).init_state(1)


class ReducedPrecision(unittest.TestCase):
    """The C++ layers reach their ops through the dispatcher, so a bf16/fp16 module and an fp32 module under
    torch.autocast run (tests/layers/reduced_precision_test.cpp measures how close to fp32 over the registry)."""

    def setUp(self):
        torch.manual_seed(0)

    def test_every_mixer_as_a_bf16_and_fp16_module_forwards_backwards_and_decodes(self):
        for dtype, eps in ((torch.bfloat16, 2 ** -7), (torch.float16, 2 ** -10)):
            for spec in mixer_specs():
                with self.subTest(spec=spec, dtype=dtype):
                    torch.manual_seed(1)
                    reference = seqmix.Mixer(spec, 32, MAX_LEN)
                    torch.manual_seed(1)
                    mixer = seqmix.Mixer(spec, 32, MAX_LEN).to(dtype)
                    self.assertTrue(all(p.dtype == dtype for p in mixer.parameters()))
                    x = torch.randn(2, T, 32).to(dtype).requires_grad_()
                    y = mixer(x)
                    self.assertEqual(y.dtype, dtype)
                    expected = reference(x.detach().float())
                    self.assertLess(((y.float() - expected).norm() / expected.norm()).item(), 8 * eps)
                    y.float().square().mean().backward()
                    self.assertEqual(x.grad.dtype, dtype)
                    self.assertTrue(all(torch.isfinite(p.grad).all() for p in mixer.parameters() if p.grad is not None))
                    if mixer.is_causal:
                        with torch.no_grad():
                            state = mixer.init_state(2)
                            steps = torch.stack([mixer.step(x[:, t].detach(), state) for t in range(T)], 1)
                        self.assertEqual(steps.dtype, dtype)
                        self.assertLess(((steps.float() - expected).norm() / expected.norm()).item(), 8 * eps)

    def test_a_model_of_mixers_trains_under_autocast(self):
        """The user's loop: a two-block model of seqmix.Mixers trained by plain PyTorch under bf16 autocast, for every
        registered mixer; the fp32 weights take float32 gradients and the loss falls."""
        for spec in mixer_specs():
            with self.subTest(spec=spec):
                torch.manual_seed(0)
                model = torch.nn.Sequential(seqmix.Mixer(spec, 32, MAX_LEN), torch.nn.LayerNorm(32),
                                            seqmix.Mixer(spec, 32, MAX_LEN), torch.nn.Linear(32, 32))
                opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
                x = torch.randn(4, T, 32)
                target = torch.roll(x, 1, dims=1)
                losses = []
                for _ in range(8):
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        y = model(x)
                    loss = torch.nn.functional.mse_loss(y.float(), target)
                    opt.zero_grad()
                    loss.backward()
                    grads = [p.grad for p in model.parameters() if p.grad is not None]
                    self.assertTrue(all(g.dtype == torch.float32 for g in grads))
                    opt.step()
                    losses.append(loss.item())
                self.assertTrue(all(math.isfinite(v) for v in losses), losses)
                self.assertLess(losses[-1], losses[0])


class ParametersReachTheCppForward(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.x = torch.randn(2, T, DIM)

    def test_state_dict_round_trip_reaches_the_cpp_forward(self):
        a, b = seqmix.Mixer("fem:prior=gla", DIM), seqmix.Mixer("fem:prior=gla", DIM)
        self.assertFalse(torch.equal(a(self.x), b(self.x)))  # different initial weights
        self.assertTrue(all(isinstance(p, torch.nn.Parameter) for p in a.parameters()))
        b.load_state_dict(a.state_dict())
        self.assertTrue(torch.equal(a(self.x), b(self.x)))

    def test_state_dict_keys_are_the_checkpoint_names(self):
        with tempfile.TemporaryDirectory() as folder:
            model = seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2"], dim=DIM)
            path = os.path.join(folder, "w.safetensors")
            seqmix.save_weights(model, path)
            saved, metadata = seqmix.read_safetensors(path)
            self.assertEqual(metadata, {"format": "pt"})
            self.assertEqual(sorted(saved), sorted(model.state_dict()))
            for k, v in model.state_dict().items():
                self.assertTrue(torch.equal(saved[k], v), k)

    def test_an_optimizer_step_changes_the_cpp_forward(self):
        mixer = seqmix.Mixer("softmax:heads=2", DIM)
        before = mixer(self.x).detach()
        opt = torch.optim.SGD(mixer.parameters(), lr=0.1)
        mixer(self.x).square().mean().backward()
        opt.step()
        self.assertFalse(torch.equal(mixer(self.x), before))

    def test_to_float64_and_back(self):
        mixer = seqmix.Mixer("fem:prior=softmax", DIM, MAX_LEN)
        y32 = mixer(self.x)
        mixer.double()
        self.assertTrue(all(p.dtype == torch.float64 for p in mixer.parameters()))
        y64 = mixer(self.x.double())
        self.assertEqual(y64.dtype, torch.float64)
        torch.testing.assert_close(y64.float(), y32, atol=1e-5, rtol=1e-4)

    def test_train_and_eval_reach_the_cpp_module(self):
        model = seqmix.LanguageModel(vocab_size=20, mixers=["softmax:heads=2"], dim=DIM, dropout=0.5)
        tokens = torch.randint(0, 20, (2, T))
        model.eval()
        self.assertTrue(torch.equal(model(tokens), model(tokens)))  # dropout off
        model.train()
        self.assertFalse(torch.equal(model(tokens), model(tokens)))  # dropout on

    def test_a_two_layer_fem_model_learns_in_python(self):
        """The docs/python.md example: a 2-layer FEM model trained by a PyTorch loop on a copy task."""
        torch.manual_seed(0)
        model = seqmix.LanguageModel(vocab_size=8, mixers=["fem:prior=softmax"], dim=32, layers=2)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(60):
            x = torch.randint(0, 8, (16, 12))
            logits = model(x)[:, :-1]
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, :-1].flatten())  # echo the token
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        self.assertLess(losses[-1], 0.3 * losses[0])


class Runs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.recall = os.path.join(cls.folder.name, "recall")
        run_cli("train", "--task", "mad.in_context_recall:seq_len=16,num_train=64,num_test=40", "--mixer",
                "fem:prior=gla", "--steps", "4", "--batch-size", "8", "--eval-every", "4", "--threads", "1",
                "--out", cls.recall)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def setUp(self):
        torch.set_num_threads(1)

    def cli_eval(self, *args):
        return json.loads(run_cli("eval", "--run", self.recall, "--threads", "1", "--json", *args))

    def test_load_run_evaluates_as_seqmix_eval_exactly(self):
        run = seqmix.load_run(self.recall)
        self.assertEqual(run.step, 4)
        self.assertEqual(run.evaluate(), self.cli_eval()["loss"])
        self.assertEqual(run.metrics(), {k: v for k, v in self.cli_eval().items() if k not in ("run", "step")})

    def test_weights_trained_in_python_are_read_by_seqmix_eval(self):
        run = seqmix.load_run(self.recall)
        opt = torch.optim.AdamW(run.model.parameters(), lr=1e-2)
        inputs, targets = run.test_set()
        run.model.train()
        for _ in range(3):
            loss = run.loss(run.model(inputs[:8]), inputs[:8], targets[:8])
            opt.zero_grad()
            loss.backward()
            opt.step()
        path = os.path.join(self.folder.name, "python.safetensors")
        seqmix.save_weights(run.model, path)
        self.assertNotEqual(run.evaluate(), self.cli_eval()["loss"])  # the checkpoint is not what Python trained
        self.assertEqual(run.evaluate(), self.cli_eval("--weights", path)["loss"])

    def test_text_run_tokenizer_and_generate_match_the_cli(self):
        text = "".join(f"line {i % 7} of a tiny corpus, said the {['cat', 'dog', 'owl'][i % 3]}.\n" for i in range(400))
        corpus = os.path.join(self.folder.name, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(text)
        run_dir = os.path.join(self.folder.name, "text")
        run_cli("train", "--task", f"text:path={corpus},seq_len=32,vocab_size=300,num_test=4", "--mixer",
                "softmax:heads=2", "--steps", "2", "--batch-size", "4", "--eval-every", "2", "--threads", "1",
                "--out", run_dir)
        run = seqmix.load_run(run_dir)
        ids = run.tokenizer.encode("said the owl")
        self.assertEqual(run.tokenizer.decode(ids), "said the owl")
        for temperature in (0.0, 0.8):
            ours = run.generate("said the", tokens=12, temperature=temperature, top_k=5, seed=3)
            theirs = run_cli("generate", "--run", run_dir, "--prompt", "said the", "--tokens", "12",
                             "--temperature", str(temperature), "--top-k", "5", "--seed", "3", "--threads", "1")
            self.assertEqual(ours + "\n", theirs)

    def test_a_run_that_is_not_text_has_no_tokenizer(self):
        with self.assertRaisesRegex(RuntimeError, "needs a run of the text task"):
            seqmix.load_run(self.recall).tokenizer.encode("x")

    def test_a_missing_run_is_a_clear_error(self):
        with self.assertRaisesRegex(RuntimeError, "no config.yaml"):
            seqmix.load_run(os.path.join(self.folder.name, "nothing"))


if __name__ == "__main__":
    unittest.main()
