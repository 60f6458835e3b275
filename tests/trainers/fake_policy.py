"""A scripted chat policy over a tiny random causal LM, for fast loops of the trainer.

It acts like a weak agent, deterministically from (sampling seed, prompt): on a search page it
searches with the task's words; elsewhere it picks one of the admissible actions listed in the
prompt, preferring ``buy now`` a third of the time. Token ids are derived from the text and
log-probs are made up (they only have to be well formed): what the tests check is the loop's
bookkeeping, not the learning.
"""

from __future__ import annotations

import hashlib
import re

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from skillrl.policies.base import Generation

VOCAB = 97
_ACTIONS = re.compile(r"^Actions: (.*)$", re.MULTILINE)


class TinyTokenizer:
    pad_token_id = 0
    eos_token_id = 1

    def save_pretrained(self, folder) -> None:  # checkpoints keep no tokenizer for the fake
        return None


def tiny_causal_lm(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


def ids_of(text: str, limit: int) -> list[int]:
    return [2 + (ord(c) % (VOCAB - 2)) for c in text][-limit:]


class ScriptedPolicy:
    name = "scripted"

    def __init__(self) -> None:
        self.model = tiny_causal_lm()
        self.tokenizer = TinyTokenizer()
        self.calls = 0

    def generate(self, conversations, sampling):
        self.calls += 1
        return [self._one(c, sampling) for c in conversations]

    def _one(self, conversation, sampling) -> Generation:
        prompt = "\n".join(m["content"] for m in conversation)
        digest = hashlib.sha256(f"{sampling.seed}|{prompt}".encode()).digest()
        match = _ACTIONS.search(prompt)
        listed = match.group(1) if match else ""
        if "search[" in listed and "click[" not in listed:
            task = re.search(r"Task: (.*)", prompt)
            words = (task.group(1) if task else "product").split()[:6]
            action = f"search[{' '.join(words)}]"
        else:
            options = re.findall(r"click\[[^\]]*\]", listed) or ["click[back to search]"]
            buy = [o for o in options if o == "click[buy now]"]
            pick = buy[0] if buy and digest[0] % 3 == 0 else options[digest[1] % len(options)]
            action = pick
        text = f"<think>go</think><action>{action}</action>"
        completion = ids_of(text, 24)
        return Generation(
            text=text,
            prompt_token_ids=ids_of(prompt, 200),
            completion_token_ids=completion,
            logprobs=[-2.0 - (digest[2] % 7) / 10] * len(completion),
        )

    def score_continuations(self, conversations, continuations):
        return [[-float(len(c)) for c in row] for row in continuations]
