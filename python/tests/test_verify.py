"""seqmix.verify: every registered mixer passes every certificate that applies to it, and planted defects in a
user's module (a look-ahead, a bidirectional memory token, a decode step one position late, a kernel with a wrong
gradient, a fused path that drifts from its reference, cross-batch mixing, leaking padding, nondeterminism) are
each caught by the certificate named for them, with the position or size of the violation."""
import json
import os
import subprocess
import unittest

import torch

import seqmix
from seqmix.verify import CERTIFICATES

DIM = 8


class Linear(torch.nn.Module):
    """y_t = W x_t: causal, decodes, nothing wrong with it (the base of the planted defects)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.w = torch.nn.Linear(DIM, DIM)

    def forward(self, x, **kwargs):
        return self.w(x)


class LookAhead(Linear):
    """y_t = W x_t + x_{t+1}: reads the next token."""

    def forward(self, x, **kwargs):
        ahead = torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1)
        return self.w(x) + ahead


class MemoryToken(Linear):
    """y_t = W x_t + mean over all tokens: a bidirectional "memory" read, as the ELA lobe's bidirectional option."""

    def forward(self, x, **kwargs):
        return self.w(x) + x.mean(1, keepdim=True)


class RunningSum(Linear):
    """y_t = W sum_{s<=t} x_s, with a decode step; `late` makes the step one position behind."""

    def __init__(self, late=False):
        super().__init__()
        self.late = late

    def forward(self, x, **kwargs):
        return self.w(x.cumsum(1))

    def init_state(self, batch):
        return {"sum": torch.zeros(batch, DIM, dtype=self.w.weight.dtype), "previous": None}

    def step(self, x_t, state):
        before = state["sum"].clone()
        state["sum"] = state["sum"] + x_t
        return self.w(before if self.late else state["sum"])


class WrongGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 3  # the derivative is 2


class BadKernel(Linear):
    def forward(self, x, **kwargs):
        return self.w(WrongGradient.apply(x))


class Drifting(Linear):
    """A 'fused' path that differs from its reference by 1e-2 of the output."""

    def forward(self, x, **kwargs):
        return self.w(x) * 1.01


class CrossBatch(Linear):
    def forward(self, x, **kwargs):
        return self.w(x) + x.mean(0, keepdim=True)


class LeakyPadding(Linear):
    """Takes a padding mask but multiplies padded values by zero (NaN * 0 = NaN leaks) and adds their sum."""

    def forward(self, x, padding_mask=None, **kwargs):
        if padding_mask is not None:
            x = x * padding_mask.unsqueeze(-1).to(x.dtype)
            x = x + x.sum(1, keepdim=True) * 0
        return self.w(x.cumsum(1))


class HalfLeakyPadding(Linear):
    """Pads scaled by a half instead of removed: a finite leak, caught by comparing real outputs bitwise."""

    def forward(self, x, padding_mask=None, **kwargs):
        if padding_mask is not None:
            x = torch.where(padding_mask.unsqueeze(-1), x, 0.5 * torch.nan_to_num(x, nan=0.0, posinf=0.0))
        return self.w(x.cumsum(1))


class IgnoresBoundaries(Linear):
    """A running sum that reads cu_seqlens but sums across the sequence boundaries."""

    def forward(self, x, cu_seqlens=None, **kwargs):
        return self.w(x.cumsum(1))


class WrongWeightGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, 2 * (grad.flatten(0, -2).t() @ x.flatten(0, -2))  # the weight's is twice too large


class BadWeightKernel(Linear):
    def forward(self, x, **kwargs):
        return WrongWeightGradient.apply(x, self.w.weight) + self.w.bias


_calls = [0]


class Noisy(Linear):
    """Adds a term that changes from call to call (a counter outside any seed)."""

    def forward(self, x, **kwargs):
        _calls[0] += 1
        return self.w(x) + 1e-6 * _calls[0]


def decode_of(module_class):
    return dict(init_state=lambda m, b: m.init_state(b), step=lambda m, x_t, s: m.step(x_t, s))


class Verify(unittest.TestCase):
    def test_a_correct_module_passes(self):
        report = seqmix.verify(RunningSum(), DIM, **decode_of(RunningSum))
        self.assertTrue(report.passed, str(report))
        row = report["RunningSum"]
        self.assertEqual(row["decode"].status, "pass")
        self.assertEqual(row["packed"].status, "n/a")
        self.assertEqual(row["cuda"].status, "pass" if torch.cuda.is_available() else "n/a")

    def assert_caught(self, report, certificate, *words):
        row = report.rows[0].certificates
        self.assertEqual(row[certificate].status, "fail", str(report))
        for word in words:
            self.assertIn(word, row[certificate].detail)
        self.assertFalse(report.passed)
        return row

    def test_a_look_ahead_fails_causality_naming_the_leak(self):
        row = self.assert_caught(seqmix.verify(LookAhead(), DIM), "causal", "token 1 set to NaN", "moved output 0",
                                 "by inf")
        # token t+1 leaks into output t: the detail names the output one before the token
        detail = row["causal"].detail.split()
        token, output = int(detail[1]), int(detail[detail.index("output") + 1])
        self.assertEqual(output, token - 1)
        self.assertEqual(row["batch"].status, "pass")

    def test_a_bidirectional_memory_token_fails_causality(self):
        row = self.assert_caught(seqmix.verify(MemoryToken(), DIM), "causal", "moved output 0")
        self.assertEqual(seqmix.verify(MemoryToken(), DIM, causal=False).rows[0].certificates["causal"].status, "n/a")

    def test_a_decode_step_one_position_late_fails_decode(self):
        self.assert_caught(seqmix.verify(RunningSum(late=True), DIM, **decode_of(RunningSum)), "decode",
                           "position 0")

    def test_a_kernel_with_a_wrong_gradient_fails_gradcheck(self):
        row = self.assert_caught(seqmix.verify(BadKernel(), DIM), "gradcheck", "Jacobian mismatch")
        self.assertEqual(row["causal"].status, "pass")

    def test_a_fused_path_off_its_reference_fails_fused_naive(self):
        self.assert_caught(seqmix.verify(Drifting(), DIM, reference=Linear()), "fused=naive", "module: output")
        self.assertTrue(seqmix.verify(Linear(), DIM, reference=Linear(), only=["fused=naive"]).passed)

    def test_cross_batch_mixing_fails_batch_independence(self):
        self.assert_caught(seqmix.verify(CrossBatch(), DIM), "batch", "sample 0")

    def test_leaking_padding_fails_padding(self):
        self.assert_caught(seqmix.verify(LeakyPadding(), DIM, masked=True), "padding")

    def test_a_finite_padding_leak_fails_padding_naming_the_position(self):
        self.assert_caught(seqmix.verify(HalfLeakyPadding(), DIM, masked=True), "padding", "moved the real output at "
                           "sample")

    def test_ignoring_sequence_boundaries_fails_packed(self):
        self.assert_caught(seqmix.verify(IgnoresBoundaries(), DIM, packed=True), "packed", "from itself alone")

    def test_a_wrong_parameter_gradient_fails_fused_naive(self):
        row = self.assert_caught(seqmix.verify(BadWeightKernel(), DIM, reference=Linear()), "fused=naive",
                                 "gradient of w.weight")
        self.assertEqual(row["gradcheck"].status, "pass")  # the input gradient is right

    def test_implementations_need_a_reference(self):
        with self.assertRaisesRegex(ValueError, "needs the reference"):
            seqmix.verify(Linear(), DIM, implementations={"fast": Linear()})

    def test_the_callers_random_state_is_left_alone(self):
        module = Noisy()  # (its constructor seeds)
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        seqmix.verify(module, DIM, only=["causal", "batch", "deterministic"])
        seqmix.verify_mixer("softmax:heads=2", dim=16, only=["causal"])
        torch.testing.assert_close(torch.rand(3), expected, atol=0, rtol=0)

    def test_nondeterminism_fails_determinism(self):
        self.assert_caught(seqmix.verify(Noisy(), DIM, only=["deterministic"]), "deterministic", "differs")

    def test_bad_arguments_are_one_line_errors(self):
        with self.assertRaisesRegex(ValueError, "unknown certificate"):
            seqmix.verify(Linear(), DIM, only=["causality"])
        with self.assertRaisesRegex(ValueError, "batch and length >= 2"):
            seqmix.verify(Linear(), DIM, length=1)

    def test_the_module_is_left_as_it_was(self):
        module = RunningSum()
        module.train()
        before = {k: v.clone() for k, v in module.state_dict().items()}
        seqmix.verify(module, DIM, **decode_of(RunningSum))
        self.assertTrue(module.training)
        for k, v in module.state_dict().items():
            torch.testing.assert_close(v, before[k], atol=0, rtol=0)


class EveryRegisteredMixer(unittest.TestCase):
    def test_every_registered_mixer_passes_every_applicable_certificate(self):
        report = seqmix.Report()
        for entry in seqmix.registry()["mixers"]:
            report = report + seqmix.verify_mixer(entry["name"], dim=32)
        self.assertTrue(report.passed, "\n".join(report.failures()) + "\n" + str(report))
        self.assertEqual(len(report.rows), len(seqmix.registry()["mixers"]))
        # what applies where: causal mixers decode, every mixer packs, FEM takes a padding mask, mixers with a
        # naive impl are held to it
        for row in report.rows:
            with self.subTest(mixer=row.name):
                self.assertEqual(set(row.certificates), set(CERTIFICATES))
                self.assertEqual(row.certificates["packed"].status, "pass")
                self.assertEqual(row.certificates["padding"].status, "pass" if row.name == "fem" else "n/a")
        self.assertEqual(report["softmax"]["fused=naive"].status, "pass")
        self.assertEqual(report["softmax"]["decode"].status, "pass")
        self.assertEqual(report["relu"]["fused=naive"].status, "n/a")

    def test_an_impl_a_mixers_options_lack_is_not_a_variant(self):
        """FEM's impl option lists fused and naive, but its delta prior has only the naive read: verify holds the
        implementations the spec accepts (none beyond the reference here) instead of failing to build one."""
        report = seqmix.verify_mixer("fem:prior=delta", dim=16, only=["fused=naive"])
        self.assertEqual(report["fem:prior=delta"]["fused=naive"].status, "n/a")
        report = seqmix.verify_mixer("fem:prior=gla", dim=16, only=["fused=naive"])
        self.assertEqual(report["fem:prior=gla"]["fused=naive"].status, "pass")

    def test_a_bidirectional_memory_lobe_shows_as_non_causal(self):
        """The Memory Lobe's bidirectional option (Hyper-Link, ELA) in a one-block stack of features: the causal
        certificate fails with the leak named; with lobe=causal it passes."""
        for lobe, status in (("bidirectional", "fail"), ("causal", "pass")):
            with self.subTest(lobe=lobe):
                torch.manual_seed(0)
                stack = seqmix.Model(f"lm:dim=16,layers=1,residual=(hyperlink:lobe={lobe})", ["ela"],
                                     input_features=16, output_features=16, seq_len=12)
                report = seqmix.verify(stack, 16, name=f"ela + hyperlink:lobe={lobe}", only=["causal"])
                self.assertEqual(report.rows[0].certificates["causal"].status, status, str(report))


class CommandLine(unittest.TestCase):
    def run_cli(self, *args):
        binary = os.environ["SEQMIX_BINARY"]
        return subprocess.run([binary, "verify", *args], capture_output=True, text=True)

    def test_the_table_and_json(self):
        done = self.run_cli("--mixer", "softmax:heads=2", "--mixer", "gla", "--only", "causal", "--only", "batch")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertRegex(done.stdout, r"\| softmax:heads=2 +\| pass +\|")
        done = self.run_cli("--mixer", "linear", "--json", "--only", "decode")
        report = json.loads(done.stdout)
        self.assertTrue(report["passed"])
        self.assertEqual(report["rows"][0]["certificates"]["decode"]["status"], "pass")

    def test_bad_input_is_one_line_and_non_zero(self):
        for args, words in ((["--mixer", "nope"], "nope"), (["--only", "causality"], "--only"),
                            (["--dim", "0"], "--dim")):
            with self.subTest(args=args):
                done = self.run_cli(*args)
                self.assertNotEqual(done.returncode, 0)
                lines = done.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, done.stderr)
                self.assertIn(words, lines[0])


if __name__ == "__main__":
    unittest.main()
