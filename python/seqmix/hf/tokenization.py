"""SeqmixTokenizer: a text run's SentencePiece model (tokenizer.model) as a transformers tokenizer, with seqmix's ids.

It hands text to SentencePiece exactly as seqmix's own tokenizer does (seqmix/_text.py: newlines, U+2581), so encode
and decode equal `seqmix.load_run(run).tokenizer`'s and the CLI's. A seqmix text model has no special tokens: no BOS
is added, and generation runs until max_new_tokens.
"""
import os
import shutil
from typing import Dict, List, Optional, Tuple

import sentencepiece
from transformers import PreTrainedTokenizer

from .. import _text


class SeqmixTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": "tokenizer.model"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file: str, **kwargs):
        if not os.path.isfile(vocab_file):
            raise ValueError(f"SeqmixTokenizer: {vocab_file} does not exist (a text run's tokenizer.model)")
        self.vocab_file = vocab_file
        self._processor = sentencepiece.SentencePieceProcessor()
        try:
            self._processor.Load(vocab_file)
        except (OSError, RuntimeError) as e:
            raise ValueError(f"SeqmixTokenizer: {vocab_file} is not a SentencePiece model ({e})") from None
        self._newline = _text.newline_piece(self._processor)
        kwargs.setdefault("padding_side", "right")  # seqmix's language models take padding on the right only
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(**kwargs)

    @property
    def newline_id(self) -> int:
        """The id a newline becomes: where a text of the corpus starts (lm-evaluation-harness's prefix_token_id,
        since a seqmix text model has no BOS token)."""
        return self._processor.piece_to_id(self._newline)

    @property
    def vocab_size(self) -> int:
        return self._processor.get_piece_size()

    def get_vocab(self) -> Dict[str, int]:
        vocab = {self._processor.id_to_piece(i): i for i in range(self.vocab_size)}
        vocab.update(self.added_tokens_encoder)
        return vocab

    # Whole-text encoding and decoding, as seqmix does it (SentencePiece on the mapped text, not piece by piece).
    def _tokenize(self, text: str, **kwargs) -> List[str]:
        return self._processor.encode(_text.to_pieces_text(text, self._newline), out_type=str)

    def _convert_token_to_id(self, token: str) -> int:
        return self._processor.piece_to_id(token)

    def _convert_id_to_token(self, index: int) -> str:
        return self._processor.id_to_piece(int(index))

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        return _text.from_pieces_text(self._processor.decode_pieces(list(tokens)), self._newline)

    def _decode(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else [int(i) for i in token_ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.all_special_ids]
        return _text.from_pieces_text(self._processor.decode(ids), self._newline)

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str]:
        if not os.path.isdir(save_directory):
            raise ValueError(f"SeqmixTokenizer.save_vocabulary: {save_directory} is not a directory")
        target = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "tokenizer.model")
        if os.path.abspath(self.vocab_file) != os.path.abspath(target):
            shutil.copyfile(self.vocab_file, target)
        return (target,)
