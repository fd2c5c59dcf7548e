"""SeqmixConfig: a seqmix language model as Hugging Face transformers describes a model (model_type "seqmix")."""
from typing import List, Optional, Sequence

from transformers import PretrainedConfig


class SeqmixConfig(PretrainedConfig):
    """The seqmix lm model (`seqmix list`, "Models"): its spec, one mixer spec per layer, the vocabulary and the context
    it was built for.

    model_spec: the lm spec with its options, e.g. "lm:dim=128,layers=4,channel=swiglu" (what seqmix.Model takes).
    mixers: the mixer specs, cycled over the layers, e.g. ["fem:prior=gla", "softmax:heads=4"].
    vocab_size: the token vocabulary. seq_len: the context the model was built for (learned position tables need it;
    0 = none), which is also max_position_embeddings when set (what lm-evaluation-harness truncates to).
    use_cache: whether generate decodes through seqmix's decode states."""

    model_type = "seqmix"

    def __init__(self, model_spec: str = "lm:dim=128,layers=2", mixers: Optional[Sequence[str]] = None,
                 vocab_size: int = 256, seq_len: int = 0, use_cache: bool = True, **kwargs):
        if not isinstance(model_spec, str) or model_spec.split(":")[0] != "lm":
            raise ValueError(f"SeqmixConfig: model_spec must be an lm spec 'lm:...' (got {model_spec!r})")
        mixers = ["softmax"] if mixers is None else list(mixers)
        if not mixers or not all(isinstance(m, str) and m for m in mixers):
            raise ValueError(f"SeqmixConfig: mixers must be a non-empty list of mixer specs (got {mixers!r})")
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"SeqmixConfig: vocab_size must be a positive integer (got {vocab_size!r})")
        if not isinstance(seq_len, int) or seq_len < 0:
            raise ValueError(f"SeqmixConfig: seq_len must be an integer >= 0 (got {seq_len!r})")
        self.model_spec = model_spec
        self.mixers: List[str] = mixers
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        kwargs.pop("max_position_embeddings", None)  # seq_len's copy, written back below
        if seq_len > 0:
            self.max_position_embeddings = seq_len
        self.use_cache = use_cache  # generate decodes through SeqmixCache (seqmix's decode states)
        # seqmix ties the head to the embedding itself (the lm's tie option): transformers must not tie anything.
        kwargs["tie_word_embeddings"] = False
        super().__init__(**kwargs)

    @classmethod
    def from_model(cls, model, **kwargs) -> "SeqmixConfig":
        """The config of a seqmix.Model (a LanguageModel, or an lm run's run.model)."""
        kind, (spec, mixers, vocab_size, input_features, output_features, seq_len, output_len) = model._construction()
        if spec.split(":")[0] != "lm" or vocab_size <= 0:
            raise ValueError(f"SeqmixConfig.from_model: a token language model is needed (got {spec!r} with "
                             f"vocab_size {vocab_size})")
        return cls(model_spec=spec, mixers=list(mixers), vocab_size=vocab_size, seq_len=seq_len, **kwargs)
