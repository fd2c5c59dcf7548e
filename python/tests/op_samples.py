"""One call of every operator of torch.ops.seqmix with float32 sample inputs, shared by the op tests that sweep
the whole op table (dtypes, compile). A new operator needs a sample here (test_every_operator_has_a_sample)."""
import torch

import seqmix

B, T, H, DK, DV, C, N = 2, 5, 2, 3, 4, 3, 2
F32 = torch.float32


def randn(*shape, scale=1.0):
    return torch.randn(*shape) * scale


def positive(*shape):
    return torch.rand(*shape) + 0.1


def unit(*shape):
    x = torch.randn(*shape)
    return x / x.norm(dim=-1, keepdim=True)


def ops():
    return torch.ops.seqmix


# One call of each operator with float32 inputs (positional, in the schema's order). Step ops start from the
# initial state their family gives.
SAMPLES = {
    "attention": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "relu_attention": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "normalised_read": lambda: (randn(B, T, H, DV), positive(B, T, H), 1e-6),
    "fem_softmax_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV), positive(H * DV)),
    "fem_scale_values": lambda: (randn(B, T, C), positive(C), 1.0),
    "fem_restore": lambda: (positive(B, T, C), torch.tensor(2.0), positive(C)),
    "linear_attention": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV)),
    "linear_attention_step": lambda: (positive(B, H, DK), positive(B, H, DK), randn(B, H, DV),
                                      *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "fem_linear_read": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), positive(H * DV)),
    "gla": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), -torch.rand(B, T, H)),
    "gla_step": lambda: (positive(B, H, DK), positive(B, H, DK), randn(B, H, DV), -torch.rand(B, H),
                         *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "fem_gla_read": lambda: (positive(B, T, H, DK), positive(B, T, H, DK), randn(B, T, H, DV), -torch.rand(B, T, H),
                             positive(H * DV)),
    "delta_rule": lambda: (unit(B, T, H, DK), unit(B, T, H, DK), randn(B, T, H, DV), torch.rand(B, T, H)),
    "delta_rule_step": lambda: (unit(B, H, DK), unit(B, H, DK), randn(B, H, DV), torch.rand(B, H),
                                *ops().linear_attention_initial_state(B, H, DK, DV, None)),
    "aft": lambda: (randn(B, T, C), randn(B, T, C)),
    "aft_step": lambda: (randn(B, C), randn(B, C), *ops().aft_initial_state(B, C, None)),
    "fem_aft_read": lambda: (randn(B, T, C), randn(B, T, C), positive(C)),
    "ssm_scan": lambda: (randn(B, T, C), positive(B, T, C), -positive(C, N), positive(B, T, N), positive(B, T, N)),
    "ssm_step": lambda: (randn(B, C), positive(B, C), -positive(C, N), positive(B, N), positive(B, N),
                         torch.zeros(B, C, N)),
    "fem_ssm_read": lambda: (randn(B, T, C), positive(B, T, C), -positive(C, N), positive(B, T, N), positive(B, T, N),
                             positive(C)),
    "ela": lambda: (randn(B, T, H, DK, scale=0.5), randn(B, T, H, DK, scale=0.5), randn(B, T, H, DV)),
    "ela_step": lambda: (randn(B, H, DK, scale=0.5), randn(B, H, DK, scale=0.5), randn(B, H, DV),
                         *ops().ela_initial_state(B, H, DK, DV, "hadamard_exp", None)),
    "hypermlp_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV)),
    "mha2nd1st_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), positive(H), randn(H)),
    "light2nd1st_read": lambda: (randn(B, T, H, DK), randn(B, T, H, DK), randn(B, T, H, DV), 0.8, randn(H)),
}
# Operators with no tensor inputs (they take a dtype) and the table itself.
WITHOUT_TENSOR_INPUTS = {"linear_attention_initial_state", "aft_initial_state", "ela_initial_state"}


def schema(name):
    return getattr(ops(), name).default._schema


def state_inputs(name):
    """The argument positions of the decode states: the inputs an output of the same name continues."""
    s = schema(name)
    outputs = {r.name for r in s.returns}
    return {i for i, a in enumerate(s.arguments) if a.name in outputs}


def table_ops():
    return {op["name"]: op["impls"] for family in seqmix.op_table()["families"] for op in family["torch_ops"]}


def impls_on(name, device):
    """The implementations of operator `name` that run on `device` ("cpu" or "cuda"), as the op table lists them."""
    for family in seqmix.op_table()["families"]:
        for entry in family["torch_ops"]:
            if entry["name"] == name:
                return entry["impls_on"][device]
    raise KeyError(name)


def floating(x):
    return isinstance(x, torch.Tensor) and x.is_floating_point()
