"""A tiny but real ``from_pretrained`` checkpoint (byte-level tokenizer with a chat template and
a one-layer Llama, or another architecture), so the CLI can be run end to end in seconds."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_tiny_checkpoint(
    folder: Path,
    layers: int = 1,
    *,
    architecture: str = "llama",
    chat_template: str = CHAT_TEMPLATE,
    dropout: float = 0.1,
) -> Path:
    """Write a random tiny model of ``architecture`` (llama, qwen2, gpt2) and its tokenizer.

    ``dropout`` is GPT-2's (its configs default to 0.1); the others have none.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {token: i for i, token in enumerate(["<pad>", "<|im_start|>", "<|im_end|>"])}
    for symbol in sorted(alphabet):
        vocab[symbol] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>", bos_token=None
    )
    tokenizer.chat_template = chat_template
    torch.manual_seed(0)
    model = _tiny_model(architecture, len(vocab), layers, dropout)
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def _tiny_model(architecture: str, vocab: int, layers: int, dropout: float):
    special = {"pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1}
    if architecture == "gpt2":
        config = GPT2Config(
            vocab_size=vocab,
            n_embd=16,
            n_layer=layers,
            n_head=2,
            n_positions=8192,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            **special,
        )
        return GPT2LMHeadModel(config)
    if architecture == "qwen2":
        config = Qwen2Config(
            vocab_size=vocab,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=8192,
            tie_word_embeddings=True,
            **special,
        )
        return Qwen2ForCausalLM(config)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=2,
        bos_token_id=1,
    )
    return LlamaForCausalLM(config)
