"""The head-only SFT loss equals the full computation: loss and every trainable gradient.

Two levels: the patched forward against plain full-vocabulary logits (right-padded rows of
uneven lengths, with and without LoRA, with ``num_items_in_batch``, as rows and as a prefix
tree), and a whole optimizer step of ``SFTTrainer`` with gradient accumulation, head-only (rows
and tree) against TRL's own head.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tiny_checkpoint import write_tiny_checkpoint
from torch.nn import functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from trainers.cold_start.head_loss import (
    add_head_only_lm_head,
    remove_head_only_lm_head,
    supports_head_only,
    target_logprobs,
)
from trainers.cold_start.sft import build_trainer
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import TurnExample

TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


def load(folder):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


def with_lora(model):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"])
    peft_model = get_peft_model(model, config)
    # LoRA's B starts at zero, which would make the adapter's A gradients zero on both sides.
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.1)
    return peft_model


def right_padded_batch(vocab: int, lengths: list[int], targets: list[int]):
    """Rows of uneven length, right-padded; the last ``targets[i]`` tokens of row i carry loss."""
    generator = torch.Generator().manual_seed(1)
    width = max(lengths)
    input_ids = torch.zeros(len(lengths), width, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for row, (length, target) in enumerate(zip(lengths, targets, strict=True)):
        input_ids[row, :length] = torch.randint(3, vocab, (length,), generator=generator)
        attention_mask[row, :length] = 1
        labels[row, length - target : length] = input_ids[row, length - target : length]
    return input_ids, attention_mask, labels


def shared_prefix_batch(vocab: int):
    """Right-padded rows that share prefixes as SFT turns do: a common start, and one row that
    continues another (an episode's later turn); the last tokens of each row carry loss."""
    input_ids, attention_mask, labels = right_padded_batch(vocab, [30, 22, 41, 9], [4, 3, 6, 2])
    input_ids[1, :12] = input_ids[0, :12]
    input_ids[2, :30] = input_ids[0, :30]
    input_ids[3, :5] = input_ids[0, :5]
    for row, length in enumerate(attention_mask.sum(-1).tolist()):
        labelled = labels[row] != -100
        labels[row, labelled] = input_ids[row, labelled]
        assert labelled[:length].any() and not labelled[length:].any()
    return input_ids, attention_mask, labels


def full_logits_loss(model, input_ids, attention_mask, labels, num_items):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    summed = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), reduction="sum"
    )
    return summed / num_items


def gradients(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("num_items", [None, 23])
@pytest.mark.parametrize("tree", [False, True])
def test_patched_forward_equals_full_logits_loss_and_gradients(
    tiny_folder, lora, num_items, tree, tree_calls
):
    reference = load(tiny_folder)
    patched = copy.deepcopy(reference)
    if lora:
        reference = with_lora(reference)
        patched = copy.deepcopy(reference)
    causal_lm = patched.get_base_model() if lora else patched
    add_head_only_lm_head(causal_lm, tree=tree)
    vocab = causal_lm.config.vocab_size
    if tree:
        input_ids, attention_mask, labels = shared_prefix_batch(vocab)
    else:
        input_ids, attention_mask, labels = right_padded_batch(vocab, [17, 9, 30], [5, 1, 12])
    labelled = int((labels[:, 1:] != -100).sum())

    out = patched(
        input_ids=input_ids,
        attention_mask=attention_mask,
        labels=labels,
        fused_lm_head=True,
        num_items_in_batch=num_items,
    )
    out.loss.backward()
    expected = full_logits_loss(
        reference, input_ids, attention_mask, labels, labelled if num_items is None else num_items
    )
    expected.backward()

    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    if tree:
        assert int(out.label_mask.sum()) == labelled == 4 + 3 + 6 + 2
        # one tree, holding each shared prefix once: 41 + (22 - 12) + (9 - 5), each row cut
        # after its last position that predicts a label
        assert tree_calls == [41 - 1 + 22 - 12 - 1 + 9 - 5 - 1]
    else:
        assert int(out.label_mask.sum()) == labelled == 5 + 1 + 12
        assert tree_calls == []
    mine, theirs = gradients(patched), gradients(reference)
    assert mine.keys() == theirs.keys() and len(mine) > 0
    for name, grad in theirs.items():
        assert grad.abs().sum() > 0, name  # every trainable parameter is reached
        torch.testing.assert_close(mine[name], grad, **TOLERANCE, msg=name)


@pytest.mark.parametrize(
    "case", ["left padding", "position_ids", "one row", "no labels", "shift_labels"]
)
def test_batches_a_tree_cannot_express_run_as_rows_with_the_same_loss(
    tiny_folder, tree_calls, case
):
    rows = load(tiny_folder)
    treed = copy.deepcopy(rows)
    add_head_only_lm_head(rows)
    add_head_only_lm_head(treed, tree=True)
    input_ids, attention_mask, labels = shared_prefix_batch(rows.config.vocab_size)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if case == "left padding":
        inputs["attention_mask"] = attention_mask.flip(-1)
    elif case == "position_ids":
        inputs["position_ids"] = torch.arange(input_ids.shape[1]).expand_as(input_ids)
    elif case == "one row":
        inputs = {key: value[:1] for key, value in inputs.items()}
    elif case == "no labels":
        inputs["labels"] = torch.full_like(labels, -100)
    else:
        inputs["shift_labels"] = inputs.pop("labels")[:, 1:]
        inputs = {
            key: value[:, :-1] if key != "shift_labels" else value for key, value in inputs.items()
        }
    expected = rows(**inputs, fused_lm_head=True).loss
    got = treed(**inputs, fused_lm_head=True).loss
    assert tree_calls == []
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


def test_outputs_are_zero_off_the_labels_and_metrics_match_the_full_row(tiny_folder):
    model = load(tiny_folder)
    head = model.get_output_embeddings()
    hidden = torch.randn(2, 6, model.config.hidden_size)
    labels = torch.full((2, 6), -100)
    labels[0, 2], labels[1, 4], labels[1, 5] = 7, 11, 50
    log_probs, entropy, is_top1 = target_logprobs(hidden, head, labels)
    logits = head(hidden).log_softmax(-1)
    mask = labels != -100
    assert (log_probs[~mask] == 0).all() and (entropy[~mask] == 0).all()
    assert not is_top1[~mask].any()
    expected = logits[mask].gather(-1, labels[mask].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(log_probs[mask], expected, **TOLERANCE)
    torch.testing.assert_close(entropy[mask], -(logits.exp() * logits).sum(-1)[mask], **TOLERANCE)
    assert is_top1[mask].tolist() == (logits[mask].argmax(-1) == labels[mask]).tolist()


def test_a_batch_without_labelled_tokens_gives_zero_loss_and_zero_gradients(tiny_folder):
    model = load(tiny_folder)
    add_head_only_lm_head(model)
    input_ids = torch.randint(3, 50, (2, 5))
    out = model(input_ids=input_ids, labels=torch.full_like(input_ids, -100), fused_lm_head=True)
    out.loss.backward()
    assert out.loss.item() == 0.0
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_calls_without_fused_head_and_removal_leave_the_plain_model(tiny_folder):
    model = load(tiny_folder)
    input_ids = torch.randint(3, 50, (1, 7))
    before = model(input_ids=input_ids, labels=input_ids)
    add_head_only_lm_head(model)
    patched = model(input_ids=input_ids, labels=input_ids)
    remove_head_only_lm_head(model)
    assert "forward" not in model.__dict__
    torch.testing.assert_close(patched.logits, before.logits)
    assert patched.loss.item() == pytest.approx(before.loss.item())


def test_models_that_scale_their_logits_are_refused(tiny_folder):
    model = load(tiny_folder)
    assert supports_head_only(model)
    model.config.final_logit_softcapping = 30.0
    assert not supports_head_only(model)


def example(index: int, prompt_words: int, target: str) -> TurnExample:
    return TurnExample(
        prompt=[
            {"role": "system", "content": "You shop."},
            {"role": "user", "content": " ".join(f"w{index}{k}" for k in range(prompt_words))},
        ],
        completion=[{"role": "assistant", "content": "<action>" + target}],
        assistant_prefix="<action>",
        action=target,
        source="expert",
        round=0,
        split="train",
        goal_id=f"g{index}",
        goal_index=index,
        episode=index,
        turn=0,
    )


class _FirstStepGradients(TrainerCallback):
    """Keeps the gradients of the first optimizer step (clipping is off in these trainers)."""

    def __init__(self, model) -> None:
        self.model = model
        self.grads: dict[str, torch.Tensor] = {}

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if not self.grads:
            self.grads = gradients(self.model)


def first_step(folder, tmp_path, *, head_only: bool, lora: bool, tree: bool = False):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    examples = [
        example(0, 3, "click[b0]</action>"),
        example(1, 40, "search[red shoes]"),
        example(2, 12, "x"),
        example(3, 25, "click[buy now]</action>"),
    ]
    config = ColdStartConfig(
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        num_train_epochs=1,
        use_peft=lora,
        lora_r=4,
        head_only_loss=head_only,
        prefix_tree=tree,
        seed=3,
    )
    folder_name = f"{head_only}-{tree}"
    trainer = build_trainer(load(folder), tokenizer, examples, config, tmp_path / folder_name)
    trainer.args.max_grad_norm = 0.0  # clipping would hide a wrong loss scale
    if lora:  # B = 0 at init: make the adapter's A gradients non-zero too
        with torch.no_grad():
            for name, parameter in trainer.model.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0, 0.1, generator=torch.Generator().manual_seed(5))
    capture = _FirstStepGradients(trainer.model)
    trainer.add_callback(capture)
    logs = []
    trainer.add_callback(_Logs(logs))
    trainer.train()
    return capture.grads, logs[0]


class _Logs(TrainerCallback):
    def __init__(self, into: list) -> None:
        self.into = into

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.into.append(dict(logs))


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("tree", [False, True])
def test_sft_step_with_accumulation_matches_trls_head(
    tiny_folder, tmp_path, lora, tree, tree_calls
):
    mine, my_log = first_step(tiny_folder, tmp_path, head_only=True, lora=lora, tree=tree)
    # two micro-batches of rows that share the chat template's system turn
    assert len(tree_calls) == (2 if tree else 0)
    theirs, their_log = first_step(tiny_folder, tmp_path, head_only=False, lora=lora)
    assert mine.keys() == theirs.keys() and len(mine) > 0
    for name, grad in theirs.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(mine[name], grad, **TOLERANCE, msg=name)
    assert my_log["loss"] == pytest.approx(their_log["loss"], rel=1e-5)
    assert my_log["grad_norm"] == pytest.approx(their_log["grad_norm"], rel=1e-5)
    for metric in ("entropy", "mean_token_accuracy"):
        assert my_log[metric] == pytest.approx(their_log[metric], rel=1e-4, abs=1e-6)
