"""seqmix checkpoints and safetensors files as tensors, in pure Python (no compiler, no safetensors package).

A run directory holds, for each checkpoint (format version 2), checkpoints/step-<N>.safetensors (the model's
parameters and buffers under their own names, metadata format=pt: safetensors.torch.load_file reads it as a state
dict), checkpoints/step-<N>.optimizer.safetensors (AdamW's state: "<name>.exp_avg" / ".exp_avg_sq" / ".step") and
checkpoints/step-<N>.json, the record that commits them (each file's size and SHA-256): a checkpoint exists once its
record does. Version-1 checkpoints (one step-<N>.safetensors of "model.*" and "optimizer.*", an FNV-1a checksum)
are read too.
"""
import hashlib
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


def fnv1a64(data):
    """The checksum a version-1 checkpoint record holds for its tensors file: 64-bit FNV-1a as seqmix computed it
    (fnv1a64_seqmix in src/io/checksum.cpp), whose offset basis is 1469598103934665603 rather than the standard
    14695981039346656037."""
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _parse(data, path):
    """(dict name -> tensor in header order, metadata) of the bytes of a safetensors file."""
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
    tensors, extents = {}, []
    for name, entry in header.items():
        try:
            dtype = _DTYPES.get(entry["dtype"])
            begin, end = (int(x) for x in entry["data_offsets"])
            shape = [int(d) for d in entry["shape"]]
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"{path}: tensor {name} has a malformed entry ({error!r})") from error
        if dtype is None:
            raise CheckpointError(f"{path}: tensor {name} has an unknown dtype {entry['dtype']!r}")
        if not 0 <= begin <= end <= len(body) or any(d < 0 for d in shape):
            raise CheckpointError(f"{path}: tensor {name} lies outside the file ({begin}..{end} of {len(body)} bytes)")
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * torch.empty((), dtype=dtype).element_size():
            raise CheckpointError(f"{path}: tensor {name} has {end - begin} bytes for shape {shape} of {entry['dtype']}")
        raw = bytearray(body[begin:end])
        tensors[name] = (torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)).reshape(shape)
        extents.append((begin, end, name))
    extents.sort()
    for (_, end_a, a), (begin_b, _, b) in zip(extents, extents[1:]):
        if begin_b < end_a:
            raise CheckpointError(f"{path}: tensors {a} and {b} overlap")
    return tensors, metadata


def read_safetensors(path):
    """Reads a safetensors file: (dict name -> tensor in header order, dict of metadata strings). Raises
    CheckpointError naming the file when it is not one."""
    with open(path, "rb") as f:
        return _parse(f.read(), path)


def checkpoint_steps(run_dir):
    """The steps of the complete checkpoints of a run directory, ascending."""
    folder = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(folder):
        return []
    steps = [int(m.group(1)) for m in (re.fullmatch(r"step-(\d{8,})\.json", f) for f in os.listdir(folder)) if m]
    return sorted(steps)


def _committed_file(folder, record_path, entry, own_name, verify, checksum_matches):
    """The bytes of a file a record commits, checked against the size (and, with verify, the checksum) recorded."""
    if entry["file"] != own_name:
        raise CheckpointError(f"{record_path}: names {entry['file']!r}, not its own step's {own_name}")
    path = os.path.join(folder, own_name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CheckpointError(f"{record_path}: its file {path} is missing") from None
    if len(data) != int(entry["bytes"]) or (verify and not checksum_matches(data)):
        raise CheckpointError(f"{path}: {len(data)} bytes that do not match its record (size {entry['bytes']}, "
                              "checksum); the file is damaged")
    return _parse(data, path)[0]


def load_checkpoint(path, step=None, verify=True):
    """The tensors of a checkpoint: `path` is a .safetensors file (its tensors as they are named in it), or a run
    directory (its checkpoint at `step`, default the latest, checked against its record's sizes and, with verify,
    checksums, as seqmix checks them: SHA-256, or for a version-1 checkpoint FNV-1a in pure Python at a few MB/s).
    From a run directory, returns dict name -> tensor with the weights as "model.<name>" and AdamW's state as
    "optimizer.<name>.*", whatever the checkpoint's version; a damaged checkpoint raises CheckpointError."""
    if not os.path.isdir(path):
        return read_safetensors(path)[0]
    steps = checkpoint_steps(path)
    if not steps:
        raise CheckpointError(f"{path}: no checkpoint (no checkpoints/step-*.json record)")
    chosen = steps[-1] if step is None else step
    if chosen not in steps:
        raise CheckpointError(f"{path}: no checkpoint at step {chosen} (steps: {steps})")
    name = f"step-{chosen:08d}"
    folder = os.path.join(path, "checkpoints")
    record_path = os.path.join(folder, name + ".json")
    try:
        with open(record_path) as f:
            record = json.load(f)
        if record["format"] == "seqmix-checkpoint-1":
            entry = {"file": record["tensors"], "bytes": int(record["tensors_bytes"])}
            checksum = int(record["tensors_fnv1a64"])
            return _committed_file(folder, record_path, entry, name + ".safetensors", verify,
                                   lambda data: fnv1a64(data) == checksum)
        if record["format"] != "seqmix-checkpoint" or record["version"] != 2:
            raise CheckpointError(f"{record_path}: checkpoint format {record['format']!r} version "
                                  f"{record.get('version')!r}; this seqmix reads versions 1 and 2")
        parts = {}
        for key, prefix, own_name in (("weights", "model.", name + ".safetensors"),
                                      ("optimizer", "optimizer.", name + ".optimizer.safetensors")):
            entry = record[key]
            tensors = _committed_file(folder, record_path, entry, own_name, verify,
                                      lambda data: hashlib.sha256(data).hexdigest() == entry["sha256"])
            parts.update({prefix + tensor_name: t for tensor_name, t in tensors.items()})
        return parts
    except CheckpointError:
        raise
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{record_path}: not a checkpoint record ({error!r})") from error


def model_state(tensors):
    """A state dict of the C++ model's names: the "model.*" tensors of load_checkpoint(run) without the prefix, or
    a weights file's tensors as they are (a version-2 step-<N>.safetensors holds nothing else)."""
    if not any(name.startswith("model.") for name in tensors):
        return dict(tensors)
    return {name[len("model.") :]: t for name, t in tensors.items() if name.startswith("model.")}
