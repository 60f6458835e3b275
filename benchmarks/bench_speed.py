"""Compute speed: the plain engine (baseline) vs the fast paths, in one run.

    python benchmarks/bench_speed.py                      # small: 2 goals x G=4, a few minutes
    python benchmarks/bench_speed.py --goals 16 --rounds 2 --train-samples 32   # the full size
    python benchmarks/bench_speed.py --device cuda [--bf16] [--no-tf32]         # on a GPU

Phases, each old (baseline column) vs new, interleaved A B B A ... over ``--rounds`` so load drift
on a shared machine hits both sides alike; ratios are total old time / total new time:

(a) the machine: 1024x1024 fp32 matmul GFLOP/s, measured before every phase, and the load
    average at the start and the end (:mod:`harness`);
(b) constrained rollouts: ``--goals`` WebShop test goals x ``--group-size`` episodes (a GRPO
    group each), greedy so both sides must choose the same actions (asserted), skills retrieved
    from a seeded bank unless ``--no-skills``. Old = ``TransformersPolicy(fast=False)``; new =
    the fast paths, including the prompt-prefix KV cache (emptied before every run, so each run
    starts cold; ``--no-prefix-reuse`` runs new without it, to measure what it adds);
(c) GRPO update trained tokens/s, LoRA and full, on the turns of whole groups (up to
    ``--train-samples`` turns) of one sampled rollout (temperature 1, as training plays; advantages
    +-1 by episode so every turn trains). Old = turns shuffled across groups into optimizer steps
    and micro-batches, every row its whole prompt; new = optimizer steps of whole groups
    (``GRPOConfig.whole_group_steps``), each cut in prompt order and run as prefix trees (each
    distinct prefix once, a short shared one in each of its children); a third side, "new, turns
    shuffled over groups", runs the new engine on the old side's step composition, to show what
    whole-group steps add; ``--compile`` adds compiled plain
    rows (``torch.compile`` turns the trees off; its compile time, spent in the warm-up step, is
    reported beside it);
(d) free decoding, batched against one episode at a time, is ``bench_rollout``'s measurement;
(e) SFT trained tokens/s, LoRA and full: ``trainers.cold_start.sft.build_trainer(...).train()`` for
    one epoch over the scripted expert's turns on ``--sft-goals`` training goals (the cold start's
    examples). Old = TRL's own fused LM head (on CPU it projects every position, prompt included),
    every row its whole prompt; new = the head on target positions only
    (``ColdStartConfig.head_only_loss``) and each micro-batch run as its prefix tree
    (``ColdStartConfig.prefix_tree``). Neither side writes a checkpoint inside the timed epoch.

GRPO old = micro-batches in shuffled order with the LM head on the last C + 1 positions of every
row (:class:`BaselineTrainer`, here: the baseline lives with its benchmark); new = the trainer as
it ships: prefix trees (:class:`trainers.update.tree_logprobs.PrefixTreeForward`), the head only
where a generated token is predicted. Trained tokens = the samples'
real (non-padding) prompt + completion tokens, a shared prefix counted once per row: the same
work unit on both sides.

Achieved GFLOP/s counts 2 x P_body multiply-adds per token the model actually ran (P_body = the
parameters of the transformer layers, i.e. without the embedding lookup and the LM head, whose
cost depends on how many positions get logits), x3 for a full-fine-tuning update (forward +
backward for activations and weights) and x2 for LoRA (weight gradients of frozen layers are
skipped); attention's sequence-quadratic part is not counted. Padding is not counted as work.

Every phase runs on ``--device`` (:func:`harness.add_device_options`; ``--threads`` only on a
CPU, TF32 only on CUDA). ``--bf16`` means per phase what training means by it: the rollouts play
a bf16 copy of the fp32 model (``skillrl train --rollout-dtype bfloat16``'s
:class:`~skillrl.policies.weight_sync.SyncedCopyPolicy`), the GRPO update runs its forwards under
bf16 autocast (``GRPOConfig.bf16``; weights and optimizer in fp32), and SFT ignores it (the cold
start trains in fp32). Each phase's line says how it ran; the run's peak memory (GPU memory
allocated by torch on CUDA, the resident set on a CPU) goes in the results.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from harness import (  # noqa: E402
    Stopwatch,
    add_device_options,
    device_label,
    machine,
    machine_text,
    matmul_gflops,
    peak_memory_mib,
    peak_memory_source,
    provenance,
    resolve_device,
    run_text,
    start_device,
    write_result,
)

from skillrl.agents.llm import LLMAgent, LLMAgentConfig  # noqa: E402
from skillrl.policies import PolicyConfig, SamplingConfig, load_policy  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402
from trainers.common.prefix_tree import PrefixTree, fold_short, padded_positions  # noqa: E402
from trainers.update.batching import (  # noqa: E402
    build_samples,
    forwarded_positions,
    step_batches,
    tree_tokens,
)
from trainers.update.config import GRPOConfig  # noqa: E402
from trainers.update.grpo import GRPOTrainer  # noqa: E402
from trainers.update.microbatch_loss import RowForward, compute_logprobs  # noqa: E402


def body_params(model) -> int:
    """Parameters of the transformer layers (no embedding lookup, no LM head)."""
    return sum(p.numel() for name, p in model.named_parameters() if ".layers." in name)


def rollout(policy, agent, starts, max_turns: int, bank, fast: bool) -> dict:
    """Play ``starts`` once; return actions, timings and the policy's phase timers."""
    policy.fast = fast
    policy.stats.reset()
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()  # no run may start with another run's prompts cached
    engine = RolloutEngine(
        agent, bank=bank, config=RolloutConfig(max_turns=max_turns, max_parallel=len(starts))
    )
    records = engine.run(starts)
    return {
        "actions": [[t.action for t in r.turns] for r in records],
        "records": records,
        "engine": engine.stats.to_dict(),
        "policy": policy.stats.to_dict(),
    }


def profile_line(result: dict) -> str:
    """Where the rollout's wall time went, in seconds and shares."""
    engine, pol = result["engine"], result["policy"]
    wall = engine["wall_seconds"]
    parts = {
        "prefill": pol["prefill_seconds"],
        "decoding": pol["decode_seconds"],
        "score prefill": pol["score_prefill_seconds"],
        "candidates": pol["score_candidates_seconds"],
        "retrieval": engine["retrieval_seconds"],
        "environment": engine["env_seconds"],
    }
    parts["python/other"] = max(0.0, wall - sum(parts.values()))
    return ", ".join(f"{k} {v:.1f}s ({100 * v / wall:.0f}%)" for k, v in parts.items())


def rollout_gflops(result: dict, params: int) -> float:
    pol = result["policy"]
    seconds = sum(
        pol[k]
        for k in (
            "prefill_seconds",
            "decode_seconds",
            "score_prefill_seconds",
            "score_candidates_seconds",
        )
    )
    tokens = pol["prefill_tokens"] + pol["candidate_tokens"] + pol["generated_tokens"]
    return 2 * params * tokens / seconds / 1e9 if seconds else 0.0


def phase_rollouts(args, policy, agent, starts, bank, gflops: list[float]) -> dict:
    old, new = [], []
    for r in range(args.rounds):
        for fast in (False, True) if r % 2 == 0 else (True, False):
            gflops.append(matmul_gflops())
            result = rollout(policy, agent, starts, args.max_turns, bank, fast)
            (new if fast else old).append(result)
            print(
                f"  rollout {'new' if fast else 'old'}: {result['engine']['wall_seconds']:.1f}s",
                flush=True,
            )
    reference = old[0]["actions"]
    for result in old + new:
        if result["actions"] != reference:
            raise AssertionError("old and new engines chose different actions (greedy)")
    return {"old": old, "new": new}


def sampled_records(args, policy, bank, starts) -> list:
    """One sampled rollout (temperature 1, as ``skillrl train`` plays its groups), new engine.

    A GRPO step trains on such turns: a group's G episodes share their first page (and its
    prompt) and part ways after, which the greedy rollouts of phase (b) cannot show.
    """
    sampling = SamplingConfig(max_new_tokens=64, temperature=1.0, seed=0, stop=["</action>"])
    agent = LLMAgent(
        policy,
        config=LLMAgentConfig(sampling=sampling),
        constrained=True,
        uses_skills=bank is not None,
    )
    return rollout(policy, agent, starts, args.max_turns, bank, True)["records"]


def training_samples(records, limit: int):
    """Whole episodes in group order up to ``limit`` turns, advantages +-1 by episode."""
    episodes, taken = [], 0
    for record in records:
        if taken >= limit:
            break
        if any(t.completion_token_ids for t in record.turns):
            episodes.append(record)
            taken += len(record.turns)
    advantages = [
        [1.0 if i % 2 == 0 else -1.0 for _ in episode.turns] for i, episode in enumerate(episodes)
    ]
    return episodes, advantages


class FullHeadRows(RowForward):
    """Plain rows with the LM head on the last C + 1 positions of every row (the old forward)."""

    def logprobs(self, model, batches, shares, temperature):
        return [compute_logprobs(model, b, temperature, head_only=False) for b in batches]


class BaselineTrainer(GRPOTrainer):
    """The old update: micro-batches cut in shuffled order, each forwarded as full-head rows."""

    def __init__(self, model, config, **kwargs) -> None:
        super().__init__(model, config, forward=FullHeadRows(), **kwargs)

    def optimizer_steps(self, samples):
        return step_batches(
            samples,
            self.config.per_device_train_batch_size,
            self.config.gradient_accumulation_steps,
            self.generator,
            sort=False,
            whole_groups=self.config.whole_group_steps,
        )


def phase_training(args, model, episodes, advantages, mode: str, gflops: list[float]) -> dict:
    from accelerate import Accelerator

    config = GRPOConfig(
        use_peft=mode == "lora",
        learning_rate=1e-6,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        bf16=args.bf16,
        tf32=args.tf32,
    )

    def on_device(trainer: type[GRPOTrainer], config: GRPOConfig) -> GRPOTrainer:
        # Without an accelerator a trainer takes CUDA whenever one is visible, --device cpu too.
        accelerator = Accelerator(cpu=args.device == "cpu")
        return trainer(copy.deepcopy(model), config, pad_token_id=0, accelerator=accelerator)

    shuffled = dataclasses.replace(config, whole_group_steps=False)
    sides = {"old": on_device(BaselineTrainer, shuffled), "new": on_device(GRPOTrainer, config)}
    # The new engine on the old side's step composition: what whole-group steps add.
    sides["mixed"] = on_device(GRPOTrainer, shuffled)
    compile_seconds = None
    if args.compile:
        sides["compiled"] = on_device(GRPOTrainer, dataclasses.replace(config, torch_compile=True))
    for name, trainer in sides.items():  # warm-up: optimizer state, first-call costs, compiling
        with Stopwatch() as clock:
            trainer.train_step(episodes, advantages)
        if name == "compiled":
            compile_seconds = clock.wall
    seconds = dict.fromkeys(sides, 0.0)
    tokens = dict.fromkeys(sides, 0)
    for r in range(args.train_rounds):
        for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            gflops.append(matmul_gflops())
            metrics = sides[name].train_step(episodes, advantages)
            seconds[name] += metrics.seconds
            tokens[name] += metrics.total_tokens
            print(f"  {mode} {name}: {metrics.seconds:.1f}s", flush=True)
    runs = {name: forwarded_by(sides[name], episodes, advantages, args) for name in sides}
    result = {
        "real_tokens": sum(s.num_tokens for s in build_samples(episodes, advantages)),
        "old_positions": runs["old"][0],
        "new_positions": runs["new"][0],
        "mixed_positions": runs["mixed"][0],
        "factor": 3 if mode == "full" else 2,
    }
    for name in sides:
        result[f"{name}_tokens_per_s"] = tokens[name] / seconds[name]
        # Work actually done: the positions a tree ran (short shared segments once per child)
        # or real tokens, padding left out.
        result[f"{name}_work_per_s"] = runs[name][1] * args.train_rounds / seconds[name]
    result["ratio"] = result["new_tokens_per_s"] / result["old_tokens_per_s"]
    result["mixed_ratio"] = result["mixed_tokens_per_s"] / result["old_tokens_per_s"]
    if "compiled" in sides:
        result["compiled_ratio"] = result["compiled_tokens_per_s"] / result["old_tokens_per_s"]
        result["compile_seconds"] = compile_seconds
    return result


def forwarded_by(trainer, episodes, advantages, args) -> tuple[int, int]:
    """Positions one pass of ``trainer`` forwards: (padding included, real ones run)."""
    samples = build_samples(episodes, advantages)
    share_prefix = trainer.forward.share_prefix
    steps = step_batches(
        samples,
        args.batch_size,
        args.grad_accum,
        torch.Generator().manual_seed(0),
        sort=not isinstance(trainer, BaselineTrainer),
        share_prefix=share_prefix,
        whole_groups=trainer.config.whole_group_steps,
    )
    total = work = 0
    for _, share in steps:
        if not share_prefix:
            total += sum(forwarded_positions(batch) for batch in share)
            work += sum(s.num_tokens for batch in share for s in batch)
            continue
        longest = max(s.num_tokens for batch in share for s in batch)
        for run in trainer.forward.runs(share, args.batch_size * longest):
            tree = PrefixTree.build([tree_tokens(s) for i in run for s in share[i]])
            total += padded_positions(tree)
            work += fold_short(tree).num_positions
    return total, work


def sft_examples(args, agent, bank) -> list:
    """The cold start's examples: the scripted expert's turns on successful training goals."""
    from trainers.cold_start.dagger import (
        ExpertLabeller,
        LabellingAgent,
        collect_examples,
        succeeded,
    )

    labelling = LabellingAgent(
        agent,
        actor=None,
        labeller=ExpertLabeller(args.sft_max_turns),
        skills=bank is not None,
        constrained=True,
    )
    starts = [EpisodeStart("webshop", "train", g, seed=g) for g in range(args.sft_goals)]
    labelled = collect_examples(
        labelling,
        starts,
        bank=bank,
        source="expert",
        round_index=0,
        max_turns=args.sft_max_turns,
        keep=succeeded,
    )
    if not labelled.examples:
        raise SystemExit("the expert solved none of the SFT goals: raise --sft-goals")
    return labelled.examples[: args.sft_examples]


def sft_run(
    policy, examples, config, head_only: bool, device: str
) -> tuple[float, float, list[int]]:
    """One epoch of ``build_trainer(...).train()`` on a copy of the model, on ``device``.

    Returns (seconds, loss, the positions of each prefix tree the epoch ran: its distinct ones,
    with the short shared segments that ran in each child counted once per child).
    """
    from transformers.trainer_callback import PrinterCallback

    from trainers.cold_start.sft import build_trainer
    from trainers.common import tree_forward

    config = dataclasses.replace(config, head_only_loss=head_only)
    trees: list[int] = []
    run_tree = tree_forward.tree_logits

    def counted(model, tree, wanted):
        trees.append(fold_short(tree).num_positions)
        return run_tree(model, tree, wanted)

    with tempfile.TemporaryDirectory(prefix="bench-sft-") as folder:
        trainer = build_trainer(
            copy.deepcopy(policy.model),
            policy.tokenizer,
            examples,
            config,
            Path(folder),
            use_cpu=device == "cpu",
        )
        trainer.remove_callback(PrinterCallback)
        tree_forward.tree_logits = counted
        try:
            with Stopwatch() as clock:
                output = trainer.train()
        finally:
            tree_forward.tree_logits = run_tree
        return clock.wall, float(output.training_loss), trees


def phase_sft(args, policy, examples, mode: str, gflops: list[float]) -> dict:
    from trainers.cold_start.sft_config import ColdStartConfig
    from trainers.cold_start.sft_data import tokenize_example

    config = ColdStartConfig(
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        num_train_epochs=1,
        learning_rate=1e-6,
        use_peft=mode == "lora",
        save_steps=10**6,  # no resumable checkpoints inside the timed epoch
    )
    rows = [tokenize_example(policy.tokenizer, e) for e in examples]
    tokens = sum(len(r["input_ids"]) for r in rows)
    for head_only in (False, True):  # warm-up: first-call costs (TRL's head has some too)
        sft_run(policy, examples[: args.batch_size], config, head_only, args.device)
    seconds = {False: 0.0, True: 0.0}
    losses: dict[bool, list[float]] = {False: [], True: []}
    trees: list[int] = []
    for r in range(args.train_rounds):
        for head_only in (False, True) if r % 2 == 0 else (True, False):
            gflops.append(matmul_gflops())
            took, loss, ran = sft_run(policy, examples, config, head_only, args.device)
            seconds[head_only] += took
            losses[head_only].append(loss)
            if head_only:
                trees = ran
            print(f"  sft {mode} {'new' if head_only else 'old'}: {took:.1f}s", flush=True)
    runs = args.train_rounds
    # Work done: old runs every real token; new, each micro-batch's tree. A micro-batch a tree
    # cannot express (a single row) runs uncounted, so then the work is not known: GF/s falls
    # back to real tokens and the report says so.
    every_batch_a_tree = len(trees) == -(-len(examples) // args.batch_size)
    result = {
        "examples": len(examples),
        "tokens": tokens,
        "target_tokens": sum(sum(r["completion_mask"]) for r in rows),
        "new_positions": sum(trees) if every_batch_a_tree else None,
        "old_tokens_per_s": tokens * runs / seconds[False],
        "new_tokens_per_s": tokens * runs / seconds[True],
        "old_work_per_s": tokens * runs / seconds[False],
        "ratio": seconds[False] / seconds[True],
        "old_loss": losses[False],
        "new_loss": losses[True],
        # Every run starts from the same weights and data order: the epoch's loss must agree.
        "same_loss": all(
            abs(a - b) <= 1e-4 * abs(a) for a, b in zip(losses[False], losses[True], strict=True)
        ),
        "factor": 3 if mode == "full" else 2,
    }
    if every_batch_a_tree:
        result["new_work_per_s"] = sum(trees) * runs / seconds[True]
    return result


BF16_HELP = (
    "bf16 per phase as training means it: rollouts play a bf16 copy of the fp32 weights "
    "(--rollout-dtype bfloat16), the GRPO update runs its forwards under bf16 autocast "
    "(weights, optimizer in float32), SFT ignores it (the cold start trains in float32)"
)


def phase_labels(args: argparse.Namespace, threads: int) -> dict[str, str]:
    """How each phase runs on ``args.device`` (:func:`harness.device_label`), by phase."""
    threads_used = threads if args.device == "cpu" else None

    def label(bf16: bool, bf16_text: str = "bf16 autocast") -> str:
        return device_label(
            args.device, bf16=bf16, tf32=args.tf32, threads=threads_used, bf16_text=bf16_text
        )

    return {
        "rollout": label(args.bf16, "bf16 weights"),
        "train": label(args.bf16),
        "sft": label(False),  # the cold start trains in float32 whatever --bf16 says
    }


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options (``--device``, ``--bf16``, ``--tf32`` from :mod:`harness`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=2, help="WebShop test goals (groups)")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per goal (G)")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="old/new rollout pairs (ABBA..)")
    parser.add_argument("--no-skills", action="store_true", help="no bank, no retrieval")
    parser.add_argument(
        "--no-prefix-reuse", action="store_true", help="new side without the prefix KV cache"
    )
    parser.add_argument("--train-samples", type=int, default=8, help="turns per GRPO step")
    parser.add_argument("--train-rounds", type=int, default=1)
    parser.add_argument(
        "--train-modes", default="lora,full", help="GRPO phase: lora, full or both (comma list)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="GRPO phase: also time the new path under torch.compile (compiles in its warm-up)",
    )
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--sft-goals", type=int, default=2, help="training goals for SFT turns")
    parser.add_argument("--sft-examples", type=int, default=8, help="most SFT turns per epoch")
    parser.add_argument("--sft-max-turns", type=int, default=10)
    parser.add_argument(
        "--skip",
        default="",
        help="comma list of phases to skip: rollout, train, sft",
    )
    parser.add_argument("--workspace", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU only)")
    add_device_options(parser, bf16_help=BF16_HELP)
    parser.add_argument(
        "--out", dest="json_path", default=None, help="also write the figures to this JSON file"
    )
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    args.device = resolve_device(parser, args.device)
    skip = set(filter(None, args.skip.split(",")))
    run = provenance("speed")
    start_device(args.device, threads=args.threads, tf32=args.tf32)

    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="bench-speed-"))
    # The trained weights, in fp32: the update and SFT copy them; rollouts play them (or, with
    # --bf16, a bf16 copy of them, as training's bf16 rollouts do).
    policy = load_policy(
        PolicyConfig(
            model="embedded",
            workspace=workspace,
            dtype="float32",
            device=args.device,
            prefix_cache_mb=0 if args.no_prefix_reuse else PolicyConfig.prefix_cache_mb,
        )
    )
    player = policy
    if args.bf16:
        from skillrl.policies.weight_sync import SyncedCopyPolicy

        player = SyncedCopyPolicy.copy_of(policy, torch.bfloat16)
    params = body_params(policy.model)
    bank = None
    if not args.no_skills:
        from memory import BankConfig, SkillBank
        from skillrl.distill.seeding import seed_bank_if_empty

        bank = SkillBank.open(BankConfig(workspace=workspace))
        seed_bank_if_empty(bank, "webshop")
    agent = LLMAgent(player, constrained=True, uses_skills=bank is not None)
    starts = [
        EpisodeStart("webshop", "test", g, seed=g, group_id=f"g{g}")
        for g in range(args.goals)
        for _ in range(args.group_size)
    ]
    gflops: list[float] = []
    report: dict = {
        "provenance": run,
        "args": vars(args),
        "threads": torch.get_num_threads(),
        "labels": phase_labels(args, torch.get_num_threads()),
        "body_params": params,
    }
    labels = report["labels"]

    if "rollout" not in skip:
        rollout(player, agent, starts[:1], 1, bank, True)  # warm-up: first-call costs
        report["rollout"] = rollout_report(
            args, player, agent, starts, bank, gflops, params, labels["rollout"]
        )
    if "train" not in skip:
        print("(c) a sampled rollout for the GRPO step's turns", flush=True)
        sampled = sampled_records(args, player, bank, starts)
        episodes, advantages = training_samples(sampled, args.train_samples)
        for mode in args.train_modes.split(","):
            print(f"(c) GRPO update, {mode}, {labels['train']}", flush=True)
            result = phase_training(args, policy.model, episodes, advantages, mode, gflops)
            for side in ("old", "new", "mixed"):
                per_s = result.get(f"{side}_work_per_s", result[f"{side}_tokens_per_s"])
                result[f"{side}_gflops"] = result["factor"] * 2 * params * per_s / 1e9
            if "compiled_tokens_per_s" in result:
                result["compiled_gflops"] = (
                    result["factor"] * 2 * params * result["compiled_work_per_s"] / 1e9
                )
            report[f"train_{mode}"] = result
    if "sft" not in skip:
        examples = sft_examples(args, agent, bank)
        for mode in ("lora", "full"):
            print(f"(e) SFT, {mode}, {len(examples)} turns, {labels['sft']}", flush=True)
            result = phase_sft(args, policy, examples, mode, gflops)
            for side in ("old", "new"):
                per_s = result.get(f"{side}_work_per_s", result[f"{side}_tokens_per_s"])
                result[f"{side}_gflops"] = result["factor"] * 2 * params * per_s / 1e9
            report[f"sft_{mode}"] = result
    if bank is not None:
        bank.close()
    report["matmul_gflops"] = {"min": min(gflops), "max": max(gflops), "all": gflops}
    report["peak_memory_mib"] = peak_memory_mib(args.device)
    print_report(report, len(starts), machine())
    if args.json_path:
        write_result(args.json_path, report, name="speed")


def rollout_report(
    args, policy, agent, starts, bank, gflops: list[float], params: int, label: str
) -> dict:
    """Phase (b): constrained rollouts, old engine vs new; ``label`` says how they run."""
    print(
        f"(b) constrained rollouts, {len(starts)} episodes, {args.rounds} rounds, {label}",
        flush=True,
    )
    rolls = phase_rollouts(args, policy, agent, starts, bank, gflops)
    old_s = sum(r["engine"]["wall_seconds"] for r in rolls["old"])
    new_s = sum(r["engine"]["wall_seconds"] for r in rolls["new"])
    turns = sum(r["engine"]["turns"] for r in rolls["old"])
    return {
        "old_turns_per_s": turns / old_s,
        "new_turns_per_s": turns / new_s,
        "ratio": old_s / new_s,
        "old_gflops": rollout_gflops(rolls["old"][0], params),
        "new_gflops": rollout_gflops(rolls["new"][0], params),
        "old_profile": profile_line(rolls["old"][0]),
        "new_profile": profile_line(rolls["new"][0]),
        "old_policy": rolls["old"][0]["policy"],
        "new_policy": rolls["new"][0]["policy"],
    }


TARGETS = {"rollout": 2.0, "train_lora": 2.0, "train_full": 2.0}
TARGETS |= {"sft_lora": 2.0, "sft_full": 2.0}
"""The speed-up each phase is asked for (new / old)."""


def rate(value: float) -> str:
    """A rate with two decimals below 10, one above."""
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}"


PHASES = {"rollout": "rollouts", "train": "GRPO update", "sft": "SFT"}
"""A phase's key in ``labels`` (and the start of its results' keys), and its name in a line."""


def labels_text(results: dict) -> str:
    """How each phase that ran was run: ``rollouts fp32 on CPU (2 threads), GRPO update ...``."""
    ran = [p for p in PHASES if any(k == p or k.startswith(f"{p}_") for k in results)]
    return ", ".join(f"{PHASES[p]} {results['labels'][p]}" for p in ran)


def run_line(results: dict) -> str:
    """The line above the table: model, how each phase ran, the CPU's matmul rate, peak memory."""
    mm = results["matmul_gflops"]
    rates = f"{mm['min']:.0f}-{mm['max']:.0f} GFLOP/s over the run (measured before every phase)"
    if "labels" not in results:  # files written before --device ran fp32 on a CPU, unlabelled
        return f"SmolLM2-135M fp32, {results['threads']} threads; matmul {rates}."
    device = results["args"]["device"]
    return (
        f"SmolLM2-135M: {labels_text(results)}; CPU matmul {rates}; "
        f"{peak_memory_source(device)} {results['peak_memory_mib']:,.0f} MiB."
    )


def report(results: dict) -> str:
    """A results file as Markdown: each phase old (baseline) against new, with its target."""
    lines = [
        run_text(results),
        "",
        run_line(results),
        "",
        "| phase | old (baseline) | new | new / old | GFLOP/s old | GFLOP/s new | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def row(label: str, key: str, old: float, new: float, ratio: float, flops=("", "")) -> None:
        met = "met" if ratio >= TARGETS[key] else "not met"
        lines.append(
            f"| {label} | {rate(old)} | {rate(new)} | **{ratio:.2f}x** | {flops[0]} | {flops[1]} "
            f"| >= {TARGETS[key]:g}x: {met} |"
        )

    args = results["args"]
    if "rollout" in results:
        r = results["rollout"]
        label = f"constrained turns/s ({args['goals']} goals x G={args['group_size']})"
        flops = (f"{r['old_gflops']:.0f}", f"{r['new_gflops']:.0f}")
        row(label, "rollout", r["old_turns_per_s"], r["new_turns_per_s"], r["ratio"], flops)
    for phase, what in (("train", "GRPO update trained tokens/s"), ("sft", "SFT trained tokens/s")):
        for mode in ("lora", "full"):
            key = f"{phase}_{mode}"
            if key not in results:
                continue
            r = results[key]
            flops = (f"{r['old_gflops']:.0f}", f"{r['new_gflops']:.0f}")
            label = f"{what}, {'LoRA' if mode == 'lora' else 'full fine-tuning'}"
            row(label, key, r["old_tokens_per_s"], r["new_tokens_per_s"], r["ratio"], flops)
    lines += ["", "Old and new chose the same greedy actions in every constrained rollout."]
    return "\n".join(lines)


def print_report(report: dict, episodes: int, at_end: dict) -> None:
    args = report["args"]
    print(f"\n{run_line(report)} P_body {report['body_params']:,}.")
    at_start = report["provenance"]["machine_at_start"]
    print(f"machine at start: {machine_text(at_start)}; at end: {machine_text(at_end)}")
    print(f"{'phase':<34}{'old':>10}{'new':>10}{'new/old':>9}{'GF/s old':>10}{'GF/s new':>10}")
    ro = report.get("rollout")
    if ro:
        print(
            f"{'constrained turns/s':<34}{ro['old_turns_per_s']:>10.3f}"
            f"{ro['new_turns_per_s']:>10.3f}{ro['ratio']:>8.2f}x{ro['old_gflops']:>10.1f}"
            f"{ro['new_gflops']:>10.1f}"
        )
    for mode in ("lora", "full"):
        tr = report.get(f"train_{mode}")
        if tr:
            work = (
                f"{tr['real_tokens']} tokens; positions run {tr['old_positions']} -> "
                f"{tr['new_positions']}: padding and prefix trees"
            )
            print(_tokens_row(f"GRPO trained tokens/s {mode}", tr, work))
            print(
                f"{'  new, turns shuffled over groups':<34}{tr['old_tokens_per_s']:>10.1f}"
                f"{tr['mixed_tokens_per_s']:>10.1f}{tr['mixed_ratio']:>8.2f}x"
                f"{'':>10}{tr['mixed_gflops']:>10.1f}   (positions run "
                f"{tr['mixed_positions']}: the old side's step composition)"
            )
            if "compiled_ratio" in tr:
                print(
                    f"{'  + torch.compile':<34}{tr['old_tokens_per_s']:>10.1f}"
                    f"{tr['compiled_tokens_per_s']:>10.1f}{tr['compiled_ratio']:>8.2f}x"
                    f"{'':>10}{tr['compiled_gflops']:>10.1f}   (after "
                    f"{tr['compile_seconds']:.0f} s compiling, in the warm-up step)"
                )
    for mode in ("lora", "full"):
        sf = report.get(f"sft_{mode}")
        if sf:
            positions = (
                f"positions run {sf['tokens']} -> {sf['new_positions']}: prefix trees"
                if sf["new_positions"] is not None
                else "some micro-batches ran as rows: new GF/s counts real tokens"
            )
            note = (
                f"{sf['examples']} turns, {sf['tokens']} tokens, {sf['target_tokens']} with loss; "
                f"{positions}; same loss: {sf['same_loss']}"
            )
            print(_tokens_row(f"SFT trained tokens/s {mode}", sf, note))
    if not ro:
        return
    print(
        f"\nrollouts: {args['goals']} goals x G={args['group_size']} = {episodes} episodes, "
        f"<= {args['max_turns']} turns, skills {'off' if args['no_skills'] else 'on'}, "
        f"prefix KV reuse (new) {'off' if args['no_prefix_reuse'] else 'on'}; "
        "same greedy actions old and new: yes (asserted)"
    )
    for side in ("old", "new"):
        pol = ro[f"{side}_policy"]
        print(
            f"profile {side}: {ro[side + '_profile']}; prompts {int(pol['prompt_rows'])} asked, "
            f"{int(pol['computed_rows'])} encoded, {int(pol['prefill_tokens'])} prompt tokens "
            f"computed, {int(pol['reused_tokens'])} reused from the prefix KV cache "
            f"({int(pol['prefix_shareable_tokens'])} in batch-wide common prefixes)"
        )


def _tokens_row(label: str, row: dict, note: str) -> str:
    """One trained-tokens/s line of the report (GRPO and SFT phases share its columns)."""
    return (
        f"{label:<34}{row['old_tokens_per_s']:>10.1f}{row['new_tokens_per_s']:>10.1f}"
        f"{row['ratio']:>8.2f}x{row['old_gflops']:>10.1f}{row['new_gflops']:>10.1f}   ({note})"
    )


if __name__ == "__main__":
    main()
