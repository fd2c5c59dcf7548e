"""A `seqmix train` text run as a transformers folder: `python -m seqmix export-hf RUN OUT`, or seqmix.hf.export_run.

The folder holds config.json (SeqmixConfig, with an auto_map to three small code files beside it that import
seqmix.hf), model.safetensors (the run's weights, names "model.<seqmix name>"), tokenizer.model with
tokenizer_config.json (SeqmixTokenizer) and generation_config.json. So AutoModelForCausalLM, AutoTokenizer,
pipeline("text-generation") and lm-evaluation-harness's `--model hf` load it: in a process that imported seqmix.hf,
or anywhere with trust_remote_code=True (the code files only import the installed seqmix).
"""
import json
import os
import shutil
import tempfile
from typing import Optional

from .. import modules
from .configuration import SeqmixConfig
from .modeling import SeqmixForCausalLM
from .tokenization import SeqmixTokenizer

# The code files a folder carries for trust_remote_code: each re-exports seqmix.hf's class.
REMOTE_CODE = {
    "configuration_seqmix.py": "from seqmix.hf.configuration import SeqmixConfig  # noqa: F401\n",
    "modeling_seqmix.py": "from seqmix.hf.modeling import SeqmixForCausalLM  # noqa: F401\n",
    "tokenization_seqmix.py": "from seqmix.hf.tokenization import SeqmixTokenizer  # noqa: F401\n",
}
AUTO_MAP = {"AutoConfig": "configuration_seqmix.SeqmixConfig",
            "AutoModelForCausalLM": "modeling_seqmix.SeqmixForCausalLM"}
TOKENIZER_AUTO_MAP = {"AutoTokenizer": ["tokenization_seqmix.SeqmixTokenizer", None]}


def export_run(run_path: str, out: str, step: Optional[int] = None) -> str:
    """Writes the text run at run_path (its latest checkpoint, or the one at step) as a transformers folder at out
    (created; it must not exist or be empty). Returns out."""
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise FileExistsError(f"export-hf: {out} exists and is not an empty folder; choose a new one")
    run = modules.load_run(run_path, step)
    tokenizer_model = os.path.join(str(run_path), "tokenizer.model")
    if not os.path.isfile(tokenizer_model):
        raise ValueError(f"export-hf: {run_path} is not a text run (it has no tokenizer.model); only language models "
                         "of the text task export")
    config = SeqmixConfig.from_model(run.model)
    model = SeqmixForCausalLM(config)
    model.model.load_state_dict(run.model.state_dict())
    # Written beside out, then moved into place: a failed export leaves nothing half-written at out.
    parent = os.path.dirname(os.path.abspath(out)) or "."
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-hf-", dir=parent)
    try:
        config.auto_map = AUTO_MAP
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer = SeqmixTokenizer(vocab_file=tokenizer_model)
        tokenizer.save_pretrained(staging)
        with open(os.path.join(staging, "tokenizer_config.json")) as f:
            tokenizer_config = json.load(f)
        tokenizer_config["auto_map"] = TOKENIZER_AUTO_MAP
        tokenizer_config["tokenizer_class"] = "SeqmixTokenizer"
        _write(os.path.join(staging, "tokenizer_config.json"), json.dumps(tokenizer_config, indent=2) + "\n")
        for name, code in REMOTE_CODE.items():
            _write(os.path.join(staging, name), code)
        if os.path.isdir(out):
            os.rmdir(out)  # empty, checked above
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
