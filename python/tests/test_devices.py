"""Every op on a device other than the CPU, checked here without a GPU: on PyTorch's meta device (tensors with
shapes and no values), where an op that made a tensor on the CPU and mixed it with its inputs fails exactly as it
would on a GPU. With the implementations `auto` picks there, the table's per-device lists, the one-device rule and
the errors for an implementation a device lacks. The values on a GPU are test_cuda.py's."""
import unittest

import torch

import seqmix
from op_samples import SAMPLES, floating, impls_on, ops, table_ops

torch.manual_seed(0)


class OnAnotherDevice(unittest.TestCase):
    def test_every_op_runs_on_meta_with_each_implementation_it_has_there(self):
        """impls_on["cuda"] lists what runs beyond the CPU: each of those, and auto, on meta tensors."""
        for name in sorted(SAMPLES):
            args = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in SAMPLES[name]()]
            for x in args:
                if floating(x):
                    x.requires_grad_()
            impls = impls_on(name, "cuda")
            for impl in (["auto"] + impls) if impls else [None]:
                with self.subTest(op=name, impl=impl):
                    out = getattr(ops(), name)(*args, **({"impl": impl} if impl else {}))
                    out = out if isinstance(out, tuple) else (out,)
                    for o in out:
                        if o is not None:
                            self.assertEqual(o.device.type, "meta")
                    # The backward on meta too: a gradient formula that makes a CPU tensor fails here.
                    grads = [o for o in out if o is not None and o.requires_grad]
                    if grads:
                        leaves = [x for x in args if floating(x)]
                        torch.autograd.grad(grads, leaves, [torch.ones_like(o) for o in grads], allow_unused=True)

    def test_the_table_lists_the_implementations_of_each_device(self):
        for name, impls in table_ops().items():
            with self.subTest(op=name):
                self.assertEqual(impls_on(name, "cpu"), impls)
                self.assertTrue(set(impls_on(name, "cuda")) <= set(impls))
                if impls:  # the naive twin is ATen: it runs everywhere
                    self.assertIn("naive", impls_on(name, "cuda"))
        # The CPU kernels stay on the CPU; the forms written in ATen run on a GPU too; GLA's fused form runs there
        # when the build compiled its GPU kernels (SEQMIX_CUDA: the Triton kernels, src/ops/gla/fused_cuda.cpp).
        gpu_scan = torch._C._dispatch_has_kernel_for_dispatch_key("seqmix::_gla_forward", "CUDA")
        self.assertEqual(impls_on("gla", "cuda"), (["fused"] if gpu_scan else []) + ["naive", "chunked"])
        self.assertEqual(impls_on("aft", "cuda"), ["naive"])
        self.assertEqual(impls_on("attention", "cuda"), ["naive", "torch"])
        self.assertEqual(impls_on("mha2nd1st_read", "cuda"), ["fused", "naive"])

    def test_the_devices_of_a_fused_form_are_the_dispatchers(self):
        # A fused form runs on a device exactly when every kernel operator it calls has a kernel registered for that
        # device's dispatch key (a GPU kernel registers itself from its own file); a fused form written in ATen
        # (no kernel operators) runs everywhere, whatever the build compiled.
        for family in seqmix.op_table()["families"]:
            for op in family["torch_ops"]:
                if "fused" not in op["impls"]:
                    continue
                for device in ("cpu", "cuda"):
                    with self.subTest(op=op["name"], device=device):
                        for kernel in op["fused_kernels"]:
                            registered = torch._C._dispatch_has_kernel_for_dispatch_key(
                                kernel["name"], "CPU" if device == "cpu" else "CUDA")
                            self.assertEqual(device in kernel["devices"], registered)
                        runs = all(device in k["devices"] for k in op["fused_kernels"])
                        self.assertEqual("fused" in op["impls_on"][device], runs)
                        # auto takes a GPU kernel only once it has passed on a GPU (its file says so).
                        passed = device == "cpu" or all(k["passed_on_gpu"] for k in op["fused_kernels"])
                        self.assertEqual(op["auto_on"][device] == "fused", runs and passed)

    def test_auto_picks_every_fused_form_written_in_aten_on_the_meta_device(self):
        # The meta device stands for a GPU. Without compiled CUDA sources a GPU still runs HyperMLP's blocked read and
        # the second-order reads, which are ATen code: auto must pick them, not their O(T^2) naive twins.
        aten_fused = [op for family in seqmix.op_table()["families"] for op in family["torch_ops"]
                      if "fused" in op["impls"] and not op["fused_kernels"]]
        self.assertEqual(sorted(op["name"] for op in aten_fused),
                         ["hypermlp_read", "light2nd1st_read", "mha2nd1st_read"])
        for op in aten_fused:
            with self.subTest(op=op["name"]):
                self.assertEqual(op["auto_on"]["cuda"], "fused")
                self.assertEqual(op["auto_on"]["cpu"], "fused")

    def test_an_implementation_a_device_lacks_is_one_line_naming_the_ones_it_has(self):
        x = torch.randn(1, 4, 3, device="meta")
        with self.assertRaises(RuntimeError) as caught:
            seqmix.aft(x, x, impl="fused")
        message = str(caught.exception).splitlines()[0]
        self.assertIn("aft has no impl 'fused' on meta", message)
        self.assertIn("its impls there: auto, naive", message)

    def test_tensors_on_two_devices_are_one_line_naming_both(self):
        q = torch.randn(1, 4, 2, 3)
        for k, what in ((q.to("meta"), "q is on cpu, k on meta"),):
            with self.assertRaises(RuntimeError) as caught:
                seqmix.attention(q, k, q)
            self.assertIn("attention: all tensors must be on one device (" + what + ")",
                          str(caught.exception).splitlines()[0])
        # A number (0-dim CPU tensor) joins any device, as in ATen.
        v = torch.rand(1, 4, 6, device="meta")
        out = ops().fem_restore(v, torch.tensor(2.0), torch.rand(6, device="meta") + 0.1)
        self.assertEqual(out.device.type, "meta")

    def test_decode_states_are_made_on_the_device_asked_for(self):
        for state in (seqmix.linear_attention_initial_state(2, 3, 4, 5, device="meta"),
                      seqmix.aft_initial_state(2, 3, device="meta"),
                      seqmix.ela_initial_state(2, 3, 4, 5, device="meta"),
                      (seqmix.ssm_initial_state(2, 3, 4, device="meta"),)):
            for s in state:
                self.assertEqual(s.device.type, "meta")

    def test_a_module_moved_to_meta_refuses_to_compute_until_it_has_storage_again(self):
        """A seqmix module moves like any nn.Module (its tensors are its own; each call binds them into the C++
        module), also to the meta device; a call there is a one-line error naming a parameter, and to_empty plus
        reset_parameters under the same seed gives the module back."""
        torch.manual_seed(0)
        mixer = seqmix.Mixer("gla", 16, 32)
        x = torch.randn(1, 5, 16)
        before = mixer(x)
        mixer.to("meta")
        self.assertEqual({p.device.type for p in mixer.parameters()}, {"meta"})
        with self.assertRaisesRegex(RuntimeError, r"seqmix.Mixer 'gla': parameter '[\w.]+' is on the meta device"):
            mixer(x)
        mixer.to_empty(device="cpu")
        torch.manual_seed(0)
        mixer.reset_parameters()
        torch.testing.assert_close(mixer(x), before, atol=0, rtol=0)

    def test_cu_seqlens_may_live_on_the_data_device(self):
        """flash-attn's convention: the offsets beside the data. On the CPU the offsets are read where they are;
        the GPU case copies them to the host once (test_cuda.py)."""
        q = torch.randn(1, 7, 2, 3)
        cu = torch.tensor([0, 3, 7])
        torch.testing.assert_close(seqmix.attention(q, q, q, cu_seqlens=cu),
                                   torch.cat([seqmix.attention(q[:, :3], q[:, :3], q[:, :3]),
                                              seqmix.attention(q[:, 3:], q[:, 3:], q[:, 3:])], 1))


if __name__ == "__main__":
    unittest.main()
