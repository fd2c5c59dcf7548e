"""seqmix's files against the real packages: a `seqmix train` checkpoint reads the same through safetensors.torch as
through seqmix's C++ reader (its weights file a PyTorch state dict, format=pt, beside AdamW's state; the SHA-256
hashlib computes); seqmix reads what safetensors.torch.save_file writes (or refuses it with one line when it is not
a weights file of the model); and plain SentencePiece reads a text run's tokenizer.model with seqmix's ids."""
import hashlib
import json
import os
import subprocess
import tempfile
import unittest

import safetensors
import safetensors.torch
import sentencepiece
import torch

import seqmix

FORMAT = "pt"


def seqmix_binary(test):
    binary = os.environ.get("SEQMIX_BINARY")
    if not binary or not os.path.exists(binary):
        test.fail("SEQMIX_BINARY is not set to the seqmix program")
    return binary


def train_a_run(test, folder):
    run = os.path.join(folder, "run")
    subprocess.run([seqmix_binary(test), "train", "--task", "mad.in_context_recall:seq_len=16,num_train=64,num_test=32",
                    "--mixer", "softmax:heads=2", "--steps", "3", "--batch-size", "8", "--eval-every", "3",
                    "--threads", "1", "--out", run], check=True, capture_output=True)
    return run


def same_bits(a, b):
    """Equal bytes (NaN included, unlike torch.equal)."""
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def seqmix_eval(test, *args):
    return subprocess.run([seqmix_binary(test), "eval", "--threads", "1", *args], capture_output=True, text=True)


class TrainCheckpointThroughSafetensors(unittest.TestCase):
    def test_every_tensor_reads_the_same_as_through_the_cpp_reader(self):
        with tempfile.TemporaryDirectory() as folder:
            for name in ("step-00000003.safetensors", "step-00000003.optimizer.safetensors"):
                path = os.path.join(train_a_run(self, os.path.join(folder, name)), "checkpoints", name)
                theirs = safetensors.torch.load_file(path)
                ours = seqmix.read_safetensors_cpp(path)
                self.assertEqual(sorted(theirs), sorted(ours))
                self.assertGreater(len(ours), 10)
                for tensor_name, tensor in ours.items():
                    self.assertEqual(theirs[tensor_name].dtype, tensor.dtype, tensor_name)
                    self.assertEqual(theirs[tensor_name].shape, tensor.shape, tensor_name)
                    self.assertTrue(torch.equal(theirs[tensor_name], tensor), tensor_name)
                with safetensors.safe_open(path, framework="pt") as f:
                    self.assertEqual(f.metadata()["format"], "pt")

    def test_the_weights_file_is_the_models_state_dict_and_the_record_holds_its_sha256(self):
        with tempfile.TemporaryDirectory() as folder:
            run = train_a_run(self, folder)
            checkpoints = os.path.join(run, "checkpoints")
            weights = safetensors.torch.load_file(os.path.join(checkpoints, "step-00000003.safetensors"))
            model = seqmix.load_run(run).model
            self.assertEqual(sorted(weights), sorted(model.state_dict()))
            model.load_state_dict(weights)  # strict: every name and shape fits
            optimizer = safetensors.torch.load_file(os.path.join(checkpoints, "step-00000003.optimizer.safetensors"))
            self.assertEqual(sorted(optimizer), sorted(f"{name}.{part}" for name, p in model.named_parameters()
                                                       for part in ("exp_avg", "exp_avg_sq", "step")))
            with open(os.path.join(checkpoints, "step-00000003.json")) as f:
                record = json.load(f)
            self.assertEqual((record["format"], record["version"]), ("seqmix-checkpoint", 2))
            for part in ("weights", "optimizer"):
                with open(os.path.join(checkpoints, record[part]["file"]), "rb") as f:
                    data = f.read()
                self.assertEqual(record[part]["bytes"], len(data), part)
                self.assertEqual(record[part]["sha256"], hashlib.sha256(data).hexdigest(), part)
            # The pure-Python reader gives the same tensors, named as for a version-1 checkpoint.
            tensors = seqmix.load_checkpoint(run)
            self.assertEqual(sorted(tensors), sorted(["model." + n for n in weights] + ["optimizer." + n for n in optimizer]))
            self.assertTrue(all(torch.equal(tensors["model." + n], t) for n, t in weights.items()))

    def test_a_checkpoint_of_format_1_reads_through_the_python_reader(self):
        fixture = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "run_format1")
        tensors = seqmix.load_checkpoint(fixture)
        stored = safetensors.torch.load_file(os.path.join(fixture, "checkpoints", "step-00000003.safetensors"))
        self.assertEqual(sorted(tensors), sorted(stored))
        self.assertTrue(any(name.startswith("optimizer.") for name in tensors))
        self.assertTrue(all(torch.equal(tensors[name], t) for name, t in stored.items()))


class FilesWrittenBySaveFile(unittest.TestCase):
    def test_the_cpp_reader_reads_every_dtype_and_shape_identically(self):
        torch.manual_seed(0)
        tensors = {
            "f32": torch.randn(3, 5),
            "f64": torch.randn(7, dtype=torch.float64),
            "f16": torch.randn(2, 3).half(),
            "bf16": torch.randn(4, 1, 2).bfloat16(),
            "i64": torch.arange(-5, 6),
            "i32": torch.arange(6, dtype=torch.int32).view(2, 3),
            "i16": torch.tensor([-300, 7], dtype=torch.int16),
            "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "u8": torch.tensor([0, 255], dtype=torch.uint8),
            "bool": torch.tensor([True, False, True]),
            "scalar": torch.tensor(2.5),
            "empty": torch.zeros(0, 3),
            "special": torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]),
        }
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "from_python.safetensors")
            safetensors.torch.save_file(tensors, path, metadata={"note": "written by safetensors"})
            ours = seqmix.read_safetensors_cpp(path)
            self.assertEqual(sorted(ours), sorted(tensors))
            for name, tensor in tensors.items():
                self.assertEqual(ours[name].dtype, tensor.dtype, name)
                self.assertEqual(ours[name].shape, tensor.shape, name)
                self.assertTrue(same_bits(ours[name], tensor), name)

    def test_eval_takes_a_checkpoint_rewritten_by_save_file(self):
        with tempfile.TemporaryDirectory() as folder:
            run = train_a_run(self, folder)
            model = safetensors.torch.load_file(os.path.join(run, "checkpoints", "step-00000003.safetensors"))
            weights = os.path.join(folder, "weights.safetensors")
            safetensors.torch.save_file(model, weights, metadata={"format": FORMAT})
            from_checkpoint = seqmix_eval(self, "--run", run, "--json")
            from_weights = seqmix_eval(self, "--run", run, "--weights", weights, "--json")
            self.assertEqual(from_checkpoint.returncode, 0, from_checkpoint.stderr)
            self.assertEqual(from_weights.returncode, 0, from_weights.stderr)
            expected, got = json.loads(from_checkpoint.stdout), json.loads(from_weights.stdout)
            self.assertEqual(got["weights"], weights)
            metrics = [key for key in expected if key not in ("run", "step")]
            self.assertIn("loss", metrics)
            for key in metrics:
                self.assertEqual(got[key], expected[key], key)

            # Changed weights change the result: eval really reads the file.
            model["head.weight" if "head.weight" in model else sorted(model)[0]].mul_(0)
            safetensors.torch.save_file(model, weights, metadata={"format": FORMAT})
            changed = json.loads(seqmix_eval(self, "--run", run, "--weights", weights, "--json").stdout)
            self.assertNotEqual(changed["loss"], expected["loss"])

    def test_a_file_that_is_not_a_seqmix_checkpoint_is_refused_in_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            run = train_a_run(self, folder)
            model = safetensors.torch.load_file(os.path.join(run, "checkpoints", "step-00000003.safetensors"))
            cases = {
                "no_metadata": (model, None, "is not a weights file seqmix reads: its metadata has no format=pt"),
                "foreign": ({"weight": torch.randn(2, 2)}, {"format": "pt"}, "does not fit the model: no tensor"),
                "missing_tensor": (dict(list(model.items())[1:]), {"format": FORMAT}, "does not fit the model: no tensor"),
                "wrong_shape": ({**model, sorted(model)[0]: torch.zeros(1)}, {"format": FORMAT},
                                "does not fit the model: tensor '" + sorted(model)[0] + "' has shape"),
            }
            for label, (tensors, metadata, message) in cases.items():
                path = os.path.join(folder, label + ".safetensors")
                safetensors.torch.save_file(tensors, path, metadata=metadata)
                result = seqmix_eval(self, "--run", run, "--weights", path)
                self.assertNotEqual(result.returncode, 0, label)
                lines = result.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, (label, result.stderr))
                self.assertIn(path, lines[0], label)
                self.assertIn(message, lines[0], label)


TEXT = "".join(line + "\n" for line in [
    "First Citizen:", "Before we proceed any further, hear me speak.", "", "All:  Speak, speak.",
    "  You are all resolved rather to die than to famish?", "Act 1, scene 23: 4567 ducats.", "\tTabbed\tline"] * 60)
SAMPLES = ["First Citizen:\nSpeak, speak.\n\n", "  leading and  double  spaces ", "\n\n\n", "na\u00efve caf\u00e9 \u2713\n",
           "digits 0123456789 and tabs\tend\n"]


class TokenizerThroughSentencePiece(unittest.TestCase):
    def test_plain_sentencepiece_gives_seqmixs_ids_and_text(self):
        with tempfile.TemporaryDirectory() as folder:
            text = os.path.join(folder, "text.txt")
            with open(text, "w") as f:
                f.write(TEXT)
            run = os.path.join(folder, "run")
            subprocess.run([seqmix_binary(self), "train", "--task", f"text:path={text},vocab_size=400,seq_len=16",
                            "--model", "lm:dim=8,layers=1", "--mixer", "softmax:heads=2", "--steps", "1",
                            "--batch-size", "2", "--threads", "1", "--out", run], check=True, capture_output=True)
            plain = sentencepiece.SentencePieceProcessor(model_file=os.path.join(run, "tokenizer.model"))
            ours = seqmix.load_run(run).tokenizer
            for sample in SAMPLES:
                ids = ours.encode(sample)
                self.assertEqual(plain.encode(sample), ids, repr(sample))
                self.assertEqual(plain.decode(ids), sample, repr(sample))
            # The one documented difference: seqmix carries SentencePiece's space mark U+2581 as U+E081.
            sample = "a \u2581 b"
            self.assertEqual(ours.decode(ours.encode(sample)), sample)
            self.assertEqual(plain.encode(sample.replace("\u2581", "\ue081")), ours.encode(sample))

    def test_a_tokenizer_of_format_1_maps_newlines_to_u_e00a(self):
        model = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "tokenizer_format1.model")
        plain = sentencepiece.SentencePieceProcessor(model_file=model)
        sample = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
        recorded = [338, 310, 339, 366, 1, 391, 344, 361, 346, 263, 317, 287, 351, 346, 331, 305, 261, 352, 356, 279,
                    354, 351, 345, 259, 351, 358, 294, 284, 269, 344, 265, 365, 344, 347, 370, 367, 1, 1, 372, 273,
                    366, 1, 371, 365, 344, 347, 370, 358, 265, 365, 344, 347, 370, 367, 1]  # seqmix's ids for it
        self.assertEqual(plain.encode(sample.replace("\n", "\ue00a")), recorded)
        self.assertEqual(plain.decode(recorded).replace("\ue00a", "\n"), sample)


if __name__ == "__main__":
    unittest.main()
