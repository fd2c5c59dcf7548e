"""SeqmixForCausalLM: a seqmix language model as a transformers PreTrainedModel, decoding through seqmix's own states.

The model holds one seqmix.Model (`self.model`, state-dict names "model.<seqmix name>"). Its forward is seqmix's
forward (the same kernels, gradients for Trainer); with a cache (generate) it is seqmix's decoding: the prompt is one
prefill, and each new token one step of the recurrent states and KV caches the C++ layers keep (SeqmixCache), not a
forward over the whole prefix.
"""
from typing import Optional

import torch
from torch import Tensor
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .. import modules
from .configuration import SeqmixConfig


class SeqmixCache(Cache):
    """seqmix's decode state of a language model as a transformers cache: every mixer's recurrent state or KV cache,
    advanced in place by prefill and step, and the tokens it has read (beam search reorders rows by reading the
    reordered tokens again: seqmix's states have no row selection, so a reorder costs one prefill of the tokens so
    far, while greedy and sampled decoding cost one step per token)."""

    is_compileable = False

    def __init__(self, model: "modules.Model", batch_size: int):
        self.layers = []  # transformers' per-layer caches: seqmix's state is one object for the whole model
        self._model = model
        self._state = model.init_state(batch_size)
        self._tokens: Optional[Tensor] = None  # [B, N] the tokens read so far
        self._batch_size = batch_size

    def read(self, tokens: Tensor) -> Tensor:
        """Logits [B, n, V] of tokens [B, n] continuing the state: one step for one token, a prefill for more."""
        if tokens.shape[0] != self._batch_size:
            raise ValueError(f"SeqmixCache: {tokens.shape[0]} rows for a cache of {self._batch_size}")
        logits = (self._model.step(tokens[:, 0], self._state).unsqueeze(1) if tokens.shape[1] == 1
                  else self._model.prefill(tokens, self._state))
        self._tokens = tokens if self._tokens is None else torch.cat([self._tokens, tokens], 1)
        return logits

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._state.position()

    def get_max_length(self, layer_idx: Optional[int] = None) -> int:
        return -1

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0):
        return self.get_seq_length() + query_length, 0

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def is_initialized(self) -> bool:
        return True

    def _rows(self, rows: Tensor) -> None:
        """Keeps rows `rows` (in that order) of the state: reads their tokens again from a fresh state."""
        rows = rows.to(torch.long).cpu()
        tokens = None if self._tokens is None else self._tokens[rows.to(self._tokens.device)]
        self._batch_size = int(rows.numel())
        self._state = self._model.init_state(self._batch_size)
        self._tokens = None
        if tokens is not None and tokens.shape[1] > 0:
            self.read(tokens)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if not torch.equal(beam_idx.cpu(), torch.arange(self._batch_size)):
            self._rows(beam_idx)

    def batch_select_indices(self, indices: Tensor) -> None:
        self._rows(indices)

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._rows(torch.arange(self._batch_size).repeat_interleave(repeats))

    def reset(self) -> None:
        self._state = self._model.init_state(self._batch_size)
        self._tokens = None

    def crop(self, max_length: int) -> None:
        raise NotImplementedError("SeqmixCache cannot drop tokens (assisted decoding): seqmix's recurrent states do "
                                  "not run backwards")


class SeqmixPreTrainedModel(PreTrainedModel):
    config_class = SeqmixConfig
    base_model_prefix = "seqmix"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = []

    @torch.no_grad()
    def _init_weights(self, module):
        """A seqmix model initialises itself (its C++ module's initialisation, with torch's generator): the tensors
        transformers did not load take the values building the model would give them."""
        if isinstance(module, modules.Model):
            missing = [name for name, t in module.state_dict(keep_vars=True).items()
                       if not getattr(t, "_is_hf_initialized", False)]
            if missing:
                module.reset_parameters(missing)


class SeqmixForCausalLM(SeqmixPreTrainedModel, GenerationMixin):
    """forward(input_ids [B,T], labels=None, past_key_values=None, use_cache=None) -> CausalLMOutputWithPast(loss,
    logits [B,T,V], past_key_values). attention_mask may pad on the right only (a causal model's real tokens do not
    read the padding after them); seqmix's language models read no padding mask, so left padding is refused."""

    def __init__(self, config: SeqmixConfig):
        super().__init__(config)
        self.model = modules.Model(config.model_spec, config.mixers, vocab_size=config.vocab_size,
                                   seq_len=config.seq_len)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # forward makes its own SeqmixCache

    def get_input_embeddings(self):
        return None

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None, use_cache=None,
                                      **kwargs):
        """With a cache, only the tokens it has not read yet."""
        if isinstance(past_key_values, SeqmixCache):
            input_ids = input_ids[:, past_key_values.get_seq_length():]
        return {"input_ids": input_ids, "past_key_values": past_key_values, "attention_mask": attention_mask,
                "use_cache": use_cache}

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None,
                past_key_values: Optional[SeqmixCache] = None, labels: Optional[Tensor] = None,
                use_cache: Optional[bool] = None, inputs_embeds: Optional[Tensor] = None, logits_to_keep: int = 0,
                return_dict: Optional[bool] = None, **kwargs) -> CausalLMOutputWithPast:
        if inputs_embeds is not None or input_ids is None:
            raise ValueError("SeqmixForCausalLM reads token ids: give input_ids (inputs_embeds is not supported)")
        if past_key_values is not None and not isinstance(past_key_values, SeqmixCache):
            raise TypeError(f"SeqmixForCausalLM: past_key_values must be a SeqmixCache (got "
                            f"{type(past_key_values).__name__})")
        use_cache = self.config.use_cache if use_cache is None else use_cache
        decoding = past_key_values is not None or (use_cache and labels is None and not torch.is_grad_enabled())
        _check_padding(attention_mask, input_ids, decoding)
        if decoding:
            if torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
                with torch.no_grad():
                    return self.forward(input_ids, attention_mask, past_key_values, labels, use_cache, None,
                                        logits_to_keep, return_dict, **kwargs)
            if past_key_values is None:
                past_key_values = SeqmixCache(self.model, input_ids.shape[0])
            logits = past_key_values.read(input_ids)
        else:
            logits = self.model(input_ids)
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(),
                                                     ignore_index=-100)
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=past_key_values if decoding else None)


def _check_padding(attention_mask: Optional[Tensor], input_ids: Tensor, decoding: bool) -> None:
    """seqmix's language models read no padding mask: a forward takes padding on the right of a row (the real tokens
    before it do not read it), decoding takes none."""
    if attention_mask is None:
        return
    mask = attention_mask.bool()
    if mask.dim() != 2 or mask.shape[0] != input_ids.shape[0]:
        raise ValueError(f"SeqmixForCausalLM: attention_mask must be [B, T] (got {tuple(attention_mask.shape)} for "
                         f"input_ids {tuple(input_ids.shape)})")
    if decoding and not bool(mask.all()):
        raise ValueError("SeqmixForCausalLM: generate reads no padding (seqmix's language models take no padding "
                         "mask); give prompts of one length, or one prompt per call")
    if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("SeqmixForCausalLM: attention_mask pads on the left of (or inside) a row; seqmix's language "
                         "models take no padding mask, so pad on the right (tokenizer.padding_side = 'right')")
