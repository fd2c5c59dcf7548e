"""seqmix's safetensors files against the real `safetensors` package: a `seqmix train` checkpoint reads the
same through safetensors.torch as through seqmix's C++ reader, and seqmix reads what safetensors.torch.save_file
writes (or refuses it with one line when it is not a seqmix checkpoint)."""
import json
import os
import subprocess
import tempfile
import unittest

import safetensors
import safetensors.torch
import torch

import seqmix

FORMAT = "seqmix-checkpoint-1"


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
            path = os.path.join(train_a_run(self, folder), "checkpoints", "step-00000003.safetensors")
            theirs = safetensors.torch.load_file(path)
            ours = seqmix.read_safetensors_cpp(path)
            self.assertEqual(sorted(theirs), sorted(ours))
            self.assertGreater(len(ours), 10)
            for name, tensor in ours.items():
                self.assertEqual(theirs[name].dtype, tensor.dtype, name)
                self.assertEqual(theirs[name].shape, tensor.shape, name)
                self.assertTrue(torch.equal(theirs[name], tensor), name)
            with safetensors.safe_open(path, framework="pt") as f:
                self.assertEqual(f.metadata(), {"format": FORMAT})


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
            checkpoint = safetensors.torch.load_file(os.path.join(run, "checkpoints", "step-00000003.safetensors"))
            model = {name: tensor for name, tensor in checkpoint.items() if name.startswith("model.")}
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
            model["model.head.weight" if "model.head.weight" in model else sorted(model)[0]].mul_(0)
            safetensors.torch.save_file(model, weights, metadata={"format": FORMAT})
            changed = json.loads(seqmix_eval(self, "--run", run, "--weights", weights, "--json").stdout)
            self.assertNotEqual(changed["loss"], expected["loss"])

    def test_a_file_that_is_not_a_seqmix_checkpoint_is_refused_in_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            run = train_a_run(self, folder)
            checkpoint = safetensors.torch.load_file(os.path.join(run, "checkpoints", "step-00000003.safetensors"))
            model = {name: tensor for name, tensor in checkpoint.items() if name.startswith("model.")}
            cases = {
                "no_metadata": (model, None, "is not a seqmix checkpoint: its metadata has no format=" + FORMAT),
                "foreign": ({"weight": torch.randn(2, 2)}, {"format": "pt"}, "is not a seqmix checkpoint"),
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


if __name__ == "__main__":
    unittest.main()
