"""Two tokenizers that differ, built locally with the `tokenizers` library (no downloads).

`byte_level_bpe` marks word starts with 'Ġ' (GPT-2 style); `metaspace_bpe` with '▁'
(SentencePiece style). Both are trained on the same words, so their vocabularies overlap
once the markers are normalised. Used by the unit tests and by the real-engine oracle.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WORDS = ("the quick brown fox jumps over a lazy dog while seven small birds sing about "
         "rivers mountains numbers and the colour of distant stars in early spring").split()


def corpus(seed: int = 0, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24))) for _ in range(lines)]


def byte_level_bpe(vocab_size: int = 512) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return tok


def metaspace_bpe(vocab_size: int = 300) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus(seed=1), trainer)
    return tok


def tokenizer_files(tok: Any, special: dict[str, str]) -> dict[str, bytes]:
    """The files transformers' save_pretrained writes for a fast tokenizer."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 2048,
              **{f"{role}_token": text for role, text in special.items()}}
    return {"tokenizer.json": tok.to_str().encode(),
            "tokenizer_config.json": json.dumps(config, indent=2).encode()}


BPE_SPECIAL = {"bos": "<s>", "eos": "</s>", "pad": "<pad>"}
METASPACE_SPECIAL = {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}


def write_tokenizer(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
