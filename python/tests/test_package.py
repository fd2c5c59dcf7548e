"""The package as a user meets it: an nn.Module built on the ops trains, and a checkpoint written by
`seqmix train` loads with the same tensors the C++ reader sees."""
import os
import subprocess
import tempfile
import unittest

import torch

import seqmix


class CausalAttentionBlock(torch.nn.Module):
    """x [B,T,D] -> x + attention(x): q, k, v projections into H heads, seqmix's fused softmax attention."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        return x + self.out(seqmix.attention(q, k, v).reshape(B, T, D))


class ModuleTraining(unittest.TestCase):
    def test_a_module_on_the_ops_learns_a_causal_running_mean(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(CausalAttentionBlock(16, 4), torch.nn.Linear(16, 16))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        x = torch.randn(32, 12, 16)
        target = x.cumsum(1) / torch.arange(1, 13).view(1, 12, 1)  # the mean of the prefix: needs causal mixing
        losses = []
        for _ in range(60):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        self.assertTrue(all(torch.isfinite(torch.tensor(losses))))
        self.assertLess(losses[-1], 0.3 * losses[0], losses)


class Checkpoints(unittest.TestCase):
    def train_a_run(self, folder):
        binary = os.environ.get("SEQMIX_BINARY")
        if not binary or not os.path.exists(binary):
            self.skipTest("SEQMIX_BINARY is not set to the seqmix program")
        run = os.path.join(folder, "run")
        subprocess.run([binary, "train", "--task", "mad.in_context_recall:seq_len=16,num_train=64,num_test=16",
                        "--mixer", "softmax:heads=2", "--steps", "3", "--batch-size", "8", "--eval-every", "3",
                        "--threads", "1", "--out", run], check=True, capture_output=True)
        return run

    def test_a_flipped_byte_fails_the_checksum(self):
        with tempfile.TemporaryDirectory() as folder:
            run = self.train_a_run(folder)
            tensors_path = os.path.join(run, "checkpoints", "step-00000003.safetensors")
            with open(tensors_path, "r+b") as f:
                f.seek(-3, os.SEEK_END)
                byte = f.read(1)
                f.seek(-3, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0x10]))
            with self.assertRaisesRegex(seqmix.CheckpointError, "do not match its record"):
                seqmix.load_checkpoint(run)
            self.assertIn("model.token_embedding.weight", seqmix.load_checkpoint(run, verify=False))

    def test_a_seqmix_train_checkpoint_loads_with_the_cpp_readers_tensors(self):
        with tempfile.TemporaryDirectory() as folder:
            run = self.train_a_run(folder)
            self.assertEqual(seqmix.checkpoint_steps(run), [3])
            tensors = seqmix.load_checkpoint(run)
            cpp = {}
            for prefix, name in (("model.", "step-00000003.safetensors"), ("optimizer.", "step-00000003.optimizer.safetensors")):
                read = seqmix.read_safetensors_cpp(os.path.join(run, "checkpoints", name))
                cpp.update({prefix + tensor_name: tensor for tensor_name, tensor in read.items()})
            self.assertEqual(list(tensors), list(cpp))
            for name, tensor in cpp.items():
                self.assertEqual(tensors[name].dtype, tensor.dtype, name)
                self.assertTrue(torch.equal(tensors[name], tensor), name)
            # A weights file read directly is already a state dict; model_state takes either.
            weights = seqmix.load_checkpoint(os.path.join(run, "checkpoints", "step-00000003.safetensors"))
            self.assertEqual(sorted(seqmix.model_state(weights)), sorted(seqmix.model_state(tensors)))
            state = seqmix.model_state(tensors)
            self.assertIn("token_embedding.weight", state)
            self.assertEqual(state["token_embedding.weight"].dtype, torch.float32)
            self.assertTrue(any(name.endswith(".exp_avg") for name in tensors))

    def test_damaged_files_are_checkpoint_errors(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "bad.safetensors")
            with open(path, "wb") as f:
                f.write(b"\x0a\x00\x00\x00\x00\x00\x00\x00{not json}")
            with self.assertRaisesRegex(seqmix.CheckpointError, "bad.safetensors: the header is not JSON"):
                seqmix.read_safetensors(path)
            with open(path, "wb") as f:
                header = b'{"a":{"dtype":"F32","shape":[1]}}'
                f.write(len(header).to_bytes(8, "little") + header + bytes(4))
            with self.assertRaisesRegex(seqmix.CheckpointError, "tensor a has a malformed entry"):
                seqmix.read_safetensors(path)
            with open(path, "wb") as f:
                header = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
                f.write(len(header).to_bytes(8, "little") + header + bytes(8))
            with self.assertRaisesRegex(seqmix.CheckpointError, "tensors a and b overlap"):
                seqmix.read_safetensors(path)
            with self.assertRaisesRegex(seqmix.CheckpointError, "no checkpoint"):
                seqmix.load_checkpoint(folder)
            with self.assertRaisesRegex(RuntimeError, "bad.safetensors"):
                seqmix.read_safetensors_cpp(path)


class Library(unittest.TestCase):
    def test_the_loaded_library_is_reported(self):
        self.assertTrue(seqmix.library_path().endswith("libseqmix_ops.so"))

    def test_version_and_build_are_the_projects(self):
        """__version__ is CMakeLists.txt's project version (the wheel's _version.py is written from it too), and the
        checkout's library holds the run loader (tests/python/wheel_install.sh checks the pip package's)."""
        import re
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "CMakeLists.txt")) as f:
            version = re.search(r"project\(seqmix VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(seqmix.__version__, version)
        self.assertEqual(seqmix.build_info(), {"version": version, "runs": True})


if __name__ == "__main__":
    unittest.main()
