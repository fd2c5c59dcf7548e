"""seqmix checkpoints and safetensors files as tensors, in pure Python (no compiler, no safetensors package).

A run directory holds checkpoints/step-<N>.safetensors (the model's parameters and buffers as "model.<name>",
AdamW's state as "optimizer.<name>.exp_avg" / ".exp_avg_sq" / ".step") and checkpoints/step-<N>.json, the record
that commits it: a checkpoint exists once its record does.
"""
import json
import os
import re
import struct

import torch

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


class CheckpointError(ValueError):
    """A file that is not a readable safetensors file or seqmix checkpoint; the message names it."""


def read_safetensors(path):
    """Reads a safetensors file: (dict name -> tensor in file order, dict of metadata strings)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise CheckpointError(f"{path}: too short for a safetensors header ({len(data)} bytes)")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > len(data) - 8:
        raise CheckpointError(f"{path}: header of {header_size} bytes runs past the end of the file")
    try:
        header = json.loads(data[8 : 8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: the header is not JSON ({error})") from error
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object")
    metadata = header.pop("__metadata__", {}) or {}
    body = memoryview(data)[8 + header_size :]
    entries = sorted(header.items(), key=lambda item: item[1]["data_offsets"][0])
    tensors = {}
    for name, entry in entries:
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise CheckpointError(f"{path}: tensor {name} has an unknown dtype {entry.get('dtype')!r}")
        begin, end = entry["data_offsets"]
        shape = list(entry["shape"])
        if not 0 <= begin <= end <= len(body):
            raise CheckpointError(f"{path}: tensor {name} lies outside the file ({begin}..{end} of {len(body)} bytes)")
        count = 1
        for d in shape:
            count *= d
        element = torch.empty((), dtype=dtype).element_size()
        if end - begin != count * element:
            raise CheckpointError(f"{path}: tensor {name} has {end - begin} bytes for shape {shape} of {entry['dtype']}")
        raw = bytearray(body[begin:end])
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(shape)
    return tensors, metadata


def checkpoint_steps(run_dir):
    """The steps of the complete checkpoints of a run directory, ascending."""
    folder = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(folder):
        return []
    steps = [int(m.group(1)) for m in (re.fullmatch(r"step-(\d{8,})\.json", f) for f in os.listdir(folder)) if m]
    return sorted(steps)


def load_checkpoint(path, step=None):
    """The tensors of a checkpoint: `path` is a .safetensors file, or a run directory (its checkpoint at `step`,
    default the latest). Returns dict name -> tensor ("model.*" and "optimizer.*")."""
    if os.path.isdir(path):
        steps = checkpoint_steps(path)
        if not steps:
            raise CheckpointError(f"{path}: no checkpoint (no checkpoints/step-*.json record)")
        chosen = steps[-1] if step is None else step
        if chosen not in steps:
            raise CheckpointError(f"{path}: no checkpoint at step {chosen} (steps: {steps})")
        record_path = os.path.join(path, "checkpoints", f"step-{chosen:08d}.json")
        with open(record_path) as f:
            record = json.load(f)
        path = os.path.join(path, "checkpoints", record["tensors"])
        if os.path.getsize(path) != record["tensors_bytes"]:
            raise CheckpointError(f"{path}: {os.path.getsize(path)} bytes, but its record says {record['tensors_bytes']}")
    tensors, _ = read_safetensors(path)
    return tensors


def model_state(tensors):
    """The "model.*" tensors of a checkpoint without the prefix: a state dict of the C++ model's names."""
    return {name[len("model.") :]: t for name, t in tensors.items() if name.startswith("model.")}
