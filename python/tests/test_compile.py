"""torch.compile(fullgraph=True) over seqmix's ops: every op and impl of the op table traces on fake tensors (the
fused kernels are operators of their own with Meta kernels, their autograd calls them through the dispatcher)
and the compiled function equals eager, outputs and gradients; a model of PyTorch layers around seqmix ops
compiles with inductor; a new sequence length compiles a new graph."""
import unittest

import torch
import torch._dynamo
import torch._dynamo.testing

import seqmix
from op_samples import SAMPLES, WITHOUT_TENSOR_INPUTS, floating, state_inputs, table_ops

torch.manual_seed(0)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


class EveryOpCompiles(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()

    def test_every_op_and_impl_compiles_fullgraph_and_equals_eager(self):
        """backend aot_eager: Dynamo's graph and AOTAutograd's forward and backward graphs, run by eager kernels,
        so the compiled result must equal eager exactly."""
        for name, impls in sorted(table_ops().items()):
            if name in WITHOUT_TENSOR_INPUTS:
                continue
            op = getattr(torch.ops.seqmix, name)
            for impl in impls or [None]:
                with self.subTest(op=name, impl=impl):
                    torch._dynamo.reset()  # one function object per op: start each from an empty cache
                    kwargs = {"impl": impl} if impl else {}
                    sample = SAMPLES[name]()
                    states = state_inputs(name)
                    leaves = [i for i, x in enumerate(sample) if floating(x) and i not in states]

                    def loss(*args):
                        return sum(o.sum() for o in as_tuple(op(*args, **kwargs)) if o is not None and o.is_floating_point())

                    def run(fn):
                        args = [x.detach().clone().requires_grad_() if i in leaves else x for i, x in enumerate(sample)]
                        value = fn(*args)
                        return value, torch.autograd.grad(value, [args[i] for i in leaves], allow_unused=True)

                    eager_value, eager_grads = run(loss)
                    compiled_value, compiled_grads = run(torch.compile(loss, fullgraph=True, backend="aot_eager"))
                    torch.testing.assert_close(compiled_value, eager_value, atol=0, rtol=0)
                    for g, e in zip(compiled_grads, eager_grads):
                        self.assertEqual(g is None, e is None)
                        if g is not None:
                            torch.testing.assert_close(g, e, atol=0, rtol=0)


    def assert_compiled_equals_eager(self, calls, inputs):
        """calls(*inputs) -> a scalar, compiled fullgraph with aot_eager, against eager: value and every input's
        gradient exactly."""
        def run(fn):
            args = [x.clone().requires_grad_() for x in inputs]
            value = fn(*args)
            return value, torch.autograd.grad(value, args)

        eager_value, eager_grads = run(calls)
        compiled_value, compiled_grads = run(torch.compile(calls, fullgraph=True, backend="aot_eager"))
        torch.testing.assert_close(compiled_value, eager_value, atol=0, rtol=0)
        for g, e in zip(compiled_grads, eager_grads):
            torch.testing.assert_close(g, e, atol=0, rtol=0)

    def test_per_key_gates_and_state_handoff_compile(self):
        """The same exactness for the calls the op table's samples do not make: GLA with per-key gates, and AFT,
        ELA and GLA continuing from a state and returning theirs."""
        B, T, H, DK, DV, C = 2, 70, 2, 3, 4, 3
        q, k = torch.rand(B, T, H, DK) + 0.1, torch.rand(B, T, H, DK) + 0.1
        v = torch.randn(B, T, H, DV)
        a_key = -torch.rand(B, T, H, DK) * 0.3
        k_aft, v_aft = torch.randn(B, T, C) * 2, torch.randn(B, T, C)

        def calls(q, k, v, a_key, k_aft, v_aft):
            num, den, gla_state = seqmix.gla(q[:, :30], k[:, :30], v[:, :30], a_key[:, :30], output_final_state=True)
            num2, den2 = seqmix.gla(q[:, 30:], k[:, 30:], v[:, 30:], a_key[:, 30:], initial_state=gla_state)
            n, d, aft_state = seqmix.aft(k_aft[:, :30], v_aft[:, :30], output_final_state=True)
            n2, d2 = seqmix.aft(k_aft[:, 30:], v_aft[:, 30:], initial_state=aft_state)
            y, ela_state = seqmix.ela(q[:, :30], k[:, :30], v[:, :30], output_final_state=True)
            y2 = seqmix.ela(q[:, 30:], k[:, 30:], v[:, 30:], initial_state=ela_state)
            return sum(x.sum() for x in (num, den, num2, den2, n, d, n2, d2, y, y2))

        self.assert_compiled_equals_eager(calls, (q, k, v, a_key, k_aft, v_aft))

    def test_packed_sequences_compile(self):
        """The fused kernels with cu_seqlens under fullgraph compile: the offsets are a tensor input the Meta
        kernels only size by (the GLA states' chunk slots), so the compiled result equals eager exactly."""
        cu = torch.tensor([0, 5, 70, 71, 100])
        T = 100
        q, k, v = torch.randn(1, T, 2, 8), torch.randn(1, T, 2, 8), torch.randn(1, T, 2, 8)
        a, k_aft, v_aft = -torch.rand(1, T, 2) * 0.3, torch.randn(1, T, 6), torch.randn(1, T, 6)

        def calls(q, k, v, a, k_aft, v_aft):
            outs = [seqmix.attention(q, k, v, cu_seqlens=cu),
                    *seqmix.gla(q.abs(), k.abs(), v, a, cu_seqlens=cu),
                    *seqmix.linear_attention(q.abs(), k.abs(), v, cu_seqlens=cu),
                    *seqmix.aft(k_aft, v_aft, cu_seqlens=cu),
                    seqmix.ssm_scan(v_aft, k_aft.abs() + 0.1, -a[0, :6].abs() - 0.1, q[..., 0, :2].abs(),
                                    k[..., 0, :2].abs(), cu_seqlens=cu)]
            return sum(o.sum() for o in outs)

        self.assert_compiled_equals_eager(calls, (q, k, v, a, k_aft, v_aft))


class Block(torch.nn.Module):
    """PyTorch projections around seqmix's fused attention, GLA, FEM read and ELA."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.decay = torch.nn.Linear(dim, heads)
        self.beta = torch.nn.Parameter(torch.ones(dim))
        self.out = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).unbind(2)
        attention = seqmix.attention(q, k, v)
        num, den = seqmix.gla(torch.nn.functional.elu(q) + 1, torch.nn.functional.elu(k) + 1, v,
                              torch.nn.functional.logsigmoid(self.decay(x)))
        mean, free = seqmix.fem_softmax_read(q, k, v, torch.nn.functional.softplus(self.beta))
        ela = seqmix.ela(q * 0.3, k * 0.3, v)
        mixed = torch.cat([attention, num / den[..., None], free - mean, ela], -1)
        return self.out(mixed.reshape(B, T, 4 * D))


class ModelCompiles(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()

    def test_inductor_matches_eager_forward_and_backward(self):
        model = Block()
        x = torch.randn(2, 70, 16)  # 70 positions: two of GLA's 64-position chunks
        eager = model(x)
        eager.square().mean().backward()
        eager_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled = torch.compile(model, fullgraph=True)(x)
        compiled.square().mean().backward()
        torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
        for g, e in zip((p.grad for p in model.parameters()), eager_grads):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)

    def test_new_lengths_recompile_and_stay_exact(self):
        """The C++ entry points read concrete sizes, so a new sequence length specialises a new graph (also under
        dynamic=True); each must equal eager."""
        model = Block()
        counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=counter)
        for T in (9, 70, 130):
            x = torch.randn(2, T, 16)
            torch.testing.assert_close(compiled(x), model(x), atol=0, rtol=0)
        self.assertGreaterEqual(counter.frame_count, 3)


if __name__ == "__main__":
    unittest.main()
