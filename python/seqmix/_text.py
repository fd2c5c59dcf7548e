"""How seqmix's tokenizer hands text to SentencePiece, written once for every Python tokenizer of a text run (the C++
side: src/io/tokenizer.cpp). SentencePiece writes spaces as U+2581 and decodes every U+2581 back to a space, so a
U+2581 of the text itself travels as U+E081; a model without a newline piece (tokenizer format 1) holds newlines as
U+E00A. Both mappings round-trip any text."""
SPACE_META, SPACE_META_STAND_IN = "\u2581", "\ue081"
NEWLINE, NEWLINE_FORMAT_1 = "\n", "\ue00a"


def newline_piece(processor) -> str:
    """The piece a newline of the text becomes in this SentencePiece model."""
    return NEWLINE if processor.piece_to_id(NEWLINE) != processor.unk_id() else NEWLINE_FORMAT_1


def to_pieces_text(text: str, newline: str) -> str:
    """The text as SentencePiece takes it."""
    return text.replace(SPACE_META, SPACE_META_STAND_IN).replace(NEWLINE, newline)


def from_pieces_text(text: str, newline: str) -> str:
    """SentencePiece's decoded text as seqmix decodes it."""
    return text.replace(newline, NEWLINE).replace(SPACE_META_STAND_IN, SPACE_META)
