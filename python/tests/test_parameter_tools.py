"""PyTorch's tools that replace a module's parameters reach seqmix's modules: whatever tensors a module holds when it
is called are what its C++ forward reads and what autograd differentiates. Each tool is checked against a plain run
(the same values written into the module's own parameters in place), over every registered mixer, channel mixer and
model: load_state_dict(assign=True), a Parameter replaced by hand, torch.nn.utils.parametrize (weight normalisation on
a projection), torch.func.functional_call and torch.func.grad through it, construction on the meta device with
to_empty and reset_parameters, swap-tensors conversion, torch.compile of a module under these tools, and FSDP2 and DDP
on two ranks (gloo) against one process on the whole batch. Bad tensors are one-line errors naming the parameter."""
import copy
import os
import tempfile
import unittest

import torch
import torch._dynamo
import torch._dynamo.testing
from torch.nn.utils import parametrizations

import seqmix
from test_module_compile import MODEL_SIZES, model_of, inputs_of
from test_modules import DIM, MAX_LEN, T, mixer_specs


def every_module():
    """(label, build, inputs) for every registered mixer, channel mixer and model: build() makes the module (drawing
    its initial values from torch's generator), inputs(batch) something to feed it."""
    for spec in mixer_specs():
        yield f"mixer {spec}", (lambda spec=spec: seqmix.Mixer(spec, DIM, MAX_LEN)), \
            (lambda batch=2: torch.randn(batch, T, DIM))
    for entry in seqmix.registry()["channel_mixers"]:
        if entry["name"] != "none":
            yield f"channel {entry['name']}", (lambda name=entry["name"]: seqmix.ChannelMixer(name, DIM)), \
                (lambda batch=2: torch.randn(batch, T, DIM))
    for name in MODEL_SIZES:
        yield f"model {name}", (lambda name=name: model_of(name)), (lambda batch=2, name=name: inputs_of(name, batch))


def loss_of(outputs):
    return outputs.float().square().mean()


def place(module, name):
    """(owner module, attribute) of a dotted parameter name."""
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def projection(module):
    """The name of the module's first parameter of two or more dimensions without a zero row (a projection or a
    table that weight normalisation can divide by its rows' norms), or None."""
    return next((n for n, p in module.named_parameters()
                 if p.dim() >= 2 and bool((p.detach().flatten(1).norm(dim=1) > 0).all())), None)


def moved(p):
    """A deterministic change of a parameter's values that keeps them in range (every parameter tensor)."""
    return p.detach() * 0.75 + 0.05


def gradients(module, x):
    """(outputs, {name: gradient}) of one forward and backward of the test loss."""
    module.zero_grad(set_to_none=True)
    y = module(x)
    loss_of(y).backward()
    return y.detach(), {n: p.grad for n, p in module.named_parameters()}


def assert_same_outcome(test, got, want, changed_from):
    """got() equals want() exactly, and differs from changed_from; or both raise the same error (a module may refuse
    some weights, e.g. zero temperatures: then the tool must be refused as the plain run is)."""
    try:
        expected = want()
    except RuntimeError as e:
        with test.assertRaises(RuntimeError) as caught:
            got()
        test.assertEqual(str(caught.exception).splitlines()[0], str(e).splitlines()[0])
        return
    result = got()
    test.assertFalse(torch.equal(result, changed_from), "the new weights should change the output")
    torch.testing.assert_close(result, expected, atol=0, rtol=0)


def assert_same_gradients(test, got, want, label, exact=True):
    test.assertEqual(set(got), set(want), label)
    for name, g in want.items():
        test.assertEqual(got[name] is None, g is None, f"{label}: {name}")
        if g is not None:
            torch.testing.assert_close(got[name], g, atol=0 if exact else 1e-6, rtol=0 if exact else 1e-5,
                                       msg=lambda m, name=name: f"{label}: {name}: {m}")


class AssignedStateDict(unittest.TestCase):
    def test_every_module_reads_what_load_state_dict_assign_true_put_in_it(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(0)
                x = inputs()
                a, b = build().eval(), build().eval()
                b.load_state_dict(a.state_dict(), assign=True)
                torch.testing.assert_close(b(x), a(x), atol=0, rtol=0)
                zeros = {k: torch.zeros_like(v) for k, v in a.state_dict().items() if v.is_floating_point()}
                plain = copy.deepcopy(a)
                plain.load_state_dict(zeros, strict=False)
                b.load_state_dict(zeros, strict=False, assign=True)
                assert_same_outcome(self, lambda: b(x), lambda: plain(x), changed_from=a(x))


class ReplacedParameters(unittest.TestCase):
    def test_every_module_reads_and_trains_parameters_assigned_by_hand(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(0)
                x = inputs()
                replaced = build().eval()
                plain = copy.deepcopy(replaced)
                for name, p in list(replaced.named_parameters()):
                    owner, leaf = place(replaced, name)
                    setattr(owner, leaf, torch.nn.Parameter(moved(p)))
                with torch.no_grad():
                    for p in plain.parameters():
                        p.copy_(moved(p))
                y, grads = gradients(replaced, x)
                y_plain, grads_plain = gradients(plain, x)
                torch.testing.assert_close(y, y_plain, atol=0, rtol=0)
                assert_same_gradients(self, grads, grads_plain, label)
                self.assertTrue(all(g is not None for g in grads.values()), f"{label}: a replaced parameter got no "
                                "gradient")

    def test_backward_twice_with_retain_graph(self):
        """The C++ layers' graph is kept as long as the caller keeps the outer one: a second backward adds the same
        gradients again."""
        torch.manual_seed(0)
        for module, x in ((seqmix.Mixer("fem:prior=gla", DIM, MAX_LEN), torch.randn(2, T, DIM)),
                          (model_of("lm"), inputs_of("lm"))):
            loss = loss_of(module(x))
            loss.backward(retain_graph=True)
            once = {n: p.grad.clone() for n, p in module.named_parameters()}
            loss.backward()
            for n, p in module.named_parameters():
                torch.testing.assert_close(p.grad, 2 * once[n], atol=0, rtol=0)
            with self.assertRaisesRegex(RuntimeError, "second time|freed"):
                loss.backward()

    def test_decoding_reads_replaced_parameters(self):
        for spec in mixer_specs():
            torch.manual_seed(0)
            mixer = seqmix.Mixer(spec, DIM, MAX_LEN).double().eval()
            if not mixer.is_causal:
                continue
            with self.subTest(spec=spec), torch.no_grad():
                name, p = next(iter(mixer.named_parameters()))
                owner, leaf = place(mixer, name)
                setattr(owner, leaf, torch.nn.Parameter(moved(p)))
                x = torch.randn(2, T, DIM, dtype=torch.float64)
                state = mixer.init_state(2)
                steps = torch.stack([mixer.step(x[:, t], state) for t in range(T)], 1)
                torch.testing.assert_close(steps, mixer(x), atol=1e-9, rtol=1e-9)
                self.assertFalse(steps.requires_grad)

    def test_bad_tensors_are_one_line_errors_naming_the_parameter(self):
        mixer = seqmix.Mixer("gla:heads=2", DIM, MAX_LEN)
        x = torch.randn(2, T, DIM)
        name, p = next(iter(mixer.named_parameters()))
        owner, leaf = place(mixer, name)
        cases = [
            ("shape", torch.nn.Parameter(torch.zeros(*p.shape, 2)), rf"parameter '{name}' has shape"),
            ("meta", torch.nn.Parameter(torch.empty_like(p, device="meta")),
             rf"parameter '{name}' is on the meta device"),
            ("integer", torch.zeros(p.shape, dtype=torch.int64), rf"parameter '{name}' is Long"),
        ]
        from torch._subclasses.fake_tensor import FakeTensorMode
        values = p.detach()
        with FakeTensorMode() as mode:
            fake = torch.nn.Parameter(mode.from_tensor(values))
        cases.append(("subclass", fake, rf"parameter '{name}' is a tensor subclass"))
        for what, bad, message in cases:
            with self.subTest(bad=what):
                held = getattr(owner, leaf)
                try:
                    owner._parameters[leaf] = bad
                    with self.assertRaisesRegex(RuntimeError, message) as caught:
                        mixer(x)
                    self.assertEqual(len(str(caught.exception).strip().splitlines()), 1, str(caught.exception))
                    self.assertTrue(str(caught.exception).startswith("seqmix.Mixer 'gla': "), str(caught.exception))
                finally:
                    owner._parameters[leaf] = held
        torch.testing.assert_close(mixer(x), mixer(x))  # the module works again with its own parameters


class Parametrizations(unittest.TestCase):
    def test_weight_normalisation_of_a_projection_in_every_module(self):
        for label, build, inputs in every_module():
            torch.manual_seed(0)
            x = inputs()
            normalised = build().eval()
            name = projection(normalised)
            if name is None:
                continue
            with self.subTest(module=label, parameter=name):
                plain = copy.deepcopy(normalised)
                before = normalised(x).detach()
                owner, leaf = place(normalised, name)
                parametrizations.weight_norm(owner, leaf)
                with torch.no_grad():
                    owner.parametrizations[leaf].original0.mul_(1.5)  # the magnitude g: the weight changes
                    weight = getattr(owner, leaf).detach()
                    plain_owner, _ = place(plain, name)
                    getattr(plain_owner, leaf).copy_(weight)
                y, grads = gradients(normalised, x)
                y_plain, grads_plain = gradients(plain, x)
                self.assertFalse(torch.equal(y, before), "the parametrization should change the output")
                torch.testing.assert_close(y, y_plain, atol=0, rtol=0)
                g, v = owner.parametrizations[leaf].original0, owner.parametrizations[leaf].original1
                g_, v_ = g.detach().requires_grad_(), v.detach().requires_grad_()
                want = torch.autograd.grad(torch._weight_norm(v_, g_, 0), (g_, v_), grads_plain[name])
                torch.testing.assert_close(g.grad, want[0], atol=1e-7, rtol=1e-5)
                torch.testing.assert_close(v.grad, want[1], atol=1e-7, rtol=1e-5)


class FunctionalCall(unittest.TestCase):
    def test_zero_parameters_through_functional_call_in_every_module(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(0)
                x = inputs()
                module = build().eval()
                own = module(x).detach()
                zeros = {n: torch.zeros_like(p) for n, p in module.named_parameters()}
                plain = copy.deepcopy(module)
                with torch.no_grad():
                    for p in plain.parameters():
                        p.zero_()
                assert_same_outcome(self, lambda: torch.func.functional_call(module, zeros, (x,)), lambda: plain(x),
                                    changed_from=own)
                torch.testing.assert_close(module(x), own, atol=0, rtol=0)  # its own parameters again afterwards

    def test_torch_func_grad_through_functional_call_in_every_module(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(0)
                x = inputs()
                module = build().eval()
                params = {n: moved(p) for n, p in module.named_parameters()}
                grads = torch.func.grad(lambda p: loss_of(torch.func.functional_call(module, p, (x,))))(params)
                plain = copy.deepcopy(module)
                with torch.no_grad():
                    for n, p in plain.named_parameters():
                        p.copy_(params[n])
                _, grads_plain = gradients(plain, x)
                assert_same_gradients(self, grads, grads_plain, label)
                for n, p in module.named_parameters():
                    self.assertIsNone(p.grad, f"{label}: torch.func.grad must not touch {n}.grad")


class MetaDevice(unittest.TestCase):
    def test_every_module_built_on_meta_then_reset_equals_one_built_directly(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(3)
                direct = build().eval()
                with torch.device("meta"):
                    module = build().eval()
                self.assertTrue(all(t.device.type == "meta" for t in module.state_dict().values()))
                x = inputs()
                with self.assertRaisesRegex(RuntimeError, "is on the meta device.*to_empty"):
                    module(x)
                module.to_empty(device="cpu")
                torch.manual_seed(3)
                module.reset_parameters()
                for (name, a), b in zip(direct.state_dict().items(), module.state_dict().values()):
                    torch.testing.assert_close(b, a, atol=0, rtol=0, msg=lambda m, name=name: f"{label} {name}: {m}")
                torch.testing.assert_close(module(x), direct(x), atol=0, rtol=0)

    def test_reset_parameters_before_to_empty_is_an_error(self):
        with torch.device("meta"):
            mixer = seqmix.Mixer("softmax:heads=2", DIM, MAX_LEN)
        with self.assertRaisesRegex(RuntimeError, "meta device.*to_empty"):
            mixer.reset_parameters()


class SwapTensors(unittest.TestCase):
    def test_every_module_converts_with_swap_module_params_on_conversion(self):
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch.manual_seed(0)
                x = inputs()
                module = build().eval()
                plain = copy.deepcopy(module).to(torch.float64)
                held = list(module.parameters())
                torch.__future__.set_swap_module_params_on_conversion(True)
                try:
                    module.to(torch.float64)
                finally:
                    torch.__future__.set_swap_module_params_on_conversion(False)
                self.assertTrue(all(a is b for a, b in zip(held, module.parameters())), "swap keeps each Parameter")
                self.assertTrue(all(p.dtype == torch.float64 for p in module.parameters()))
                x = x.double() if x.is_floating_point() else x
                torch.testing.assert_close(module(x), plain(x), atol=0, rtol=0)


class CompiledUnderTheTools(unittest.TestCase):
    def test_every_module_compiles_fullgraph_under_the_tools(self):
        """One compiled function per module reads a replaced Parameter, a weight-normalised projection and
        functional_call's dictionary at once; it equals eager (outputs and gradients) without a graph break."""
        for label, build, inputs in every_module():
            with self.subTest(module=label):
                torch._dynamo.reset()
                torch.manual_seed(0)
                x = inputs()
                module = build().eval()
                names = [n for n, _ in module.named_parameters()]
                first = names[0]
                owner, leaf = place(module, first)
                setattr(owner, leaf, torch.nn.Parameter(moved(getattr(owner, leaf))))
                normalised = projection(module)
                if normalised is not None and normalised != first:
                    parametrizations.weight_norm(*place(module, normalised))
                last = names[-1]
                given = {last: moved(module.get_parameter(last))} if last not in (first, normalised) else {}

                def step(x, given):
                    return loss_of(torch.func.functional_call(module, given, (x,), strict=False))

                counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
                compiled = torch.compile(step, backend=counter, fullgraph=True)
                results = []
                for fn in (step, compiled):
                    module.zero_grad(set_to_none=True)
                    tensors = {k: v.clone().requires_grad_() for k, v in given.items()}
                    loss = fn(x, tensors)
                    loss.backward()
                    results.append((loss.detach(), {n: p.grad for n, p in module.named_parameters()},
                                    {k: v.grad for k, v in tensors.items()}))
                self.assertEqual(counter.frame_count, 1)
                torch.testing.assert_close(results[1][0], results[0][0], atol=1e-6, rtol=1e-5)
                assert_same_gradients(self, results[1][1], results[0][1], label, exact=False)
                assert_same_gradients(self, results[1][2], results[0][2], label, exact=False)


# ---- two ranks ------------------------------------------------------------------------------------------------------

STEPS, LR, BATCH = 3, 0.1, 4


def _train(module, batches, wrapped=None):
    """Three SGD steps of the test loss; the module's outputs on a probe batch afterwards."""
    net = wrapped or module
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    for x in batches:
        optimizer.zero_grad()
        loss_of(net(x)).backward()
        optimizer.step()


def _full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _two_ranks(rank, world, init_file, report):
    """Each rank trains every module three steps under FSDP2 and under DDP on its half of each batch, and one process
    on the whole batch; all three must agree. Failures are written to report (one line each)."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.nn.parallel import DistributedDataParallel
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world,))
    failures = []
    half = BATCH // world

    def check(label, got, want):
        try:
            torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-4)
        except AssertionError as e:
            failures.append(f"{label}: {str(e).splitlines()[0]}")

    for label, build, inputs in every_module():
        torch.manual_seed(0)
        batches = [inputs(BATCH) for _ in range(STEPS)]
        probe = inputs(2)
        torch.manual_seed(1)
        one = build().eval()
        _train(one, batches)
        with torch.no_grad():
            want = one(probe)
        mine = [x[rank * half:(rank + 1) * half] for x in batches]
        for tool in ("fsdp2", "ddp"):
            torch.manual_seed(1)
            module = build().eval()
            if tool == "fsdp2":
                fully_shard(module, mesh=mesh)
                _train(module, mine)
            else:
                _train(module, mine, DistributedDataParallel(module))
            with torch.no_grad():
                check(f"{tool} {label} outputs", module(probe), want)
            for (name, p), q in zip(module.named_parameters(), one.parameters()):
                check(f"{tool} {label} {name}", _full(p.detach()), q.detach())

    # A DTensor parameter without FSDP's hooks: gathered whole for the call, its gradient sharded back.
    torch.manual_seed(1)
    module = seqmix.Mixer("softmax:heads=2", DIM, MAX_LEN)
    plain = copy.deepcopy(module)
    name = projection(module)
    owner, leaf = place(module, name)
    setattr(owner, leaf, torch.nn.Parameter(distribute_tensor(getattr(owner, leaf).detach(), mesh, [Shard(0)])))
    x = torch.randn(2, T, DIM)
    y, grads = gradients(module, x)
    y_plain, grads_plain = gradients(plain, x)
    check("dtensor outputs", y, y_plain)
    check("dtensor gradient", _full(grads[name]), grads_plain[name])

    # Decoding under FSDP2 (outside the forward, the parameters are sharded DTensors): gathered, equal to one process.
    torch.manual_seed(1)
    model = seqmix.LanguageModel(vocab_size=20, mixers=["fem:prior=gla", "softmax:heads=2"], dim=DIM, layers=2).eval()
    want = model.generate(torch.tensor([[1, 2, 3]]), 5, temperature=0)
    fully_shard(model, mesh=mesh)
    got = model.generate(torch.tensor([[1, 2, 3]]), 5, temperature=0)
    if not torch.equal(got, want):
        failures.append(f"fsdp2 generate: {got.tolist()} != {want.tolist()}")

    # FSDP2's meta-device initialisation: build on meta, shard, to_empty, reset: the shards of the direct build.
    torch.manual_seed(5)
    direct = seqmix.LanguageModel(vocab_size=20, mixers=["gla:heads=2"], dim=DIM, layers=2)
    with torch.device("meta"):
        model = seqmix.LanguageModel(vocab_size=20, mixers=["gla:heads=2"], dim=DIM, layers=2)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    torch.manual_seed(5)
    model.reset_parameters()
    for (name, p), q in zip(model.named_parameters(), direct.parameters()):
        check(f"fsdp2 meta-device reset {name}", _full(p.detach()), q.detach())

    with open(f"{report}.{rank}", "w") as f:
        f.write("\n".join(failures))
    torch.distributed.destroy_process_group()


class TwoRanks(unittest.TestCase):
    def test_fsdp2_and_ddp_on_two_ranks_equal_one_process_for_every_module(self):
        with tempfile.TemporaryDirectory() as folder:
            report = os.path.join(folder, "failures")
            torch.multiprocessing.spawn(_two_ranks, args=(2, os.path.join(folder, "init"), report), nprocs=2)
            for rank in range(2):
                with open(f"{report}.{rank}") as f:
                    failures = f.read().strip()
                self.assertEqual(failures, "", f"rank {rank}:\n{failures}")


if __name__ == "__main__":
    unittest.main()
