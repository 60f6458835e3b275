"""A first GPU check in one command: what the CUDA paths do on one card, each step time-boxed.

    bash scripts/gpu_check.sh                       # on a machine with one NVIDIA GPU, < 5 min
    bash scripts/gpu_check.sh --small               # tiny sizes, any machine (CPU: a few minutes)
    bash scripts/gpu_check.sh --out docs/results/gpu_check.json

Every step runs in its own process under coreutils ``timeout``; a step that fails or runs out
of time is logged (the tail of its output kept in the JSON) and the next one runs. Steps:

- ``nvidia-smi``: the card, its memory and driver.
- ``model``: the policy's weights. The embedded SmolLM2-135M-Instruct when its weights are on
  the machine; without them (no network, no GGUF), a SmolLM2-135M-shaped Llama (30 layers, 576
  wide, 49,152-token vocabulary) with fixed-seed random weights and a byte-level tokenizer, and
  the results say so: timings hold, text is noise. ``--small``: a two-layer, 64-wide random Llama.
- ``update``: one GRPO ``train_step`` (``bench_train_throughput``'s measurement) in fp32, fp32
  with TF32 (CUDA only: a CPU has none) and bf16 autocast, full fine-tuning and LoRA: tokens/s,
  peak memory, the loss, and model FLOP utilisation MFU = 6 x parameters x tokens/s over the
  card's dense bf16 peak (:data:`BF16_PEAK_TFLOPS`, by card name; none on a CPU). 6N counts a
  full update's forward and backward; a LoRA update skips frozen weights' gradients, so its MFU
  overstates the work by about a third.
- ``generation``: free generation (greedy) and candidate scoring through the transformers policy
  at batch 1, 16, 64 and 256: generated tokens/s and scored candidates/s.
- ``rollouts``: ``RolloutEngine`` on WebShop, skills off, 16 and 64 episodes played together.
- ``train cycle``: one ``skillrl train`` cycle (rollout, update, a one-goal evaluation, save).
- ``gpu tests``: the tests marked ``gpu`` (they skip without CUDA).
- ``vllm``: whether the vLLM backend imports (it is not run: its server is another check).

The JSON is rendered into docs/results.md by :func:`report` (``benchmarks/render_results.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import peak_memory_mib, provenance, run_text, write_result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BF16_PEAK_TFLOPS: dict[str, float] = {
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "GH200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
    "A10G": 70.0,
    "A10": 125.0,
    "RTX 4090": 165.0,
}
"""Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s from NVIDIA's data sheets, matched as a
substring of the card's name, first match in this order (``H100 PCIe`` before ``H100``)."""

SMOLLM2_135M = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
"""SmolLM2-135M-Instruct's architecture (its published ``config.json``)."""

TINY = {
    **SMOLLM2_135M,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": None,
}
"""``--small``'s model: SmolLM2's layout, shrunk (its vocabulary is the tokenizer's: None)."""

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Sizes:
    """How big each step's work is."""

    update_turns: int
    prompt_tokens: int
    completion_tokens: int
    batch_size: int
    grad_accum: int
    update_steps: int
    generation_batches: tuple[int, ...]
    new_tokens: int
    candidates: int
    rollout_episodes: tuple[int, ...]
    rollout_turns: int
    cycle_goals: int
    cycle_group: int


FULL = Sizes(16, 384, 32, 8, 2, 3, (1, 16, 64, 256), 32, 8, (16, 64), 3, 4, 4)
SMALL = Sizes(4, 64, 8, 2, 2, 1, (1, 16, 64), 8, 4, (4, 8), 2, 2, 2)

TIMEOUTS = {
    "nvidia-smi": 30,
    "model": 240,
    "update": 150,
    "generation": 240,
    "rollouts": 240,
    "train cycle": 300,
    "gpu tests": 300,
    "vllm": 60,
}
"""Seconds each step may take before ``timeout`` stops it (an ``update`` entry is per run)."""

UPDATE_PRECISIONS = {
    "fp32": ["--no-bf16", "--no-tf32"],
    "tf32": ["--no-bf16", "--tf32"],
    "bf16": ["--bf16", "--no-tf32"],
}


def bf16_peak_tflops(card: str) -> float | None:
    """The card's dense bf16 peak in TFLOP/s; None for a CPU or a card not in the table."""
    for name, peak in BF16_PEAK_TFLOPS.items():
        if name in card:
            return peak
    return None


def mfu(parameters: int, tokens_per_second: float, peak_tflops: float | None) -> float | None:
    """Model FLOP utilisation: 6 N tokens/s over the peak (PaLM's; attention left out)."""
    if peak_tflops is None:
        return None
    return 6 * parameters * tokens_per_second / (peak_tflops * 1e12)


# --- the steps, each run in its own process (``--step``) -------------------------------------


def write_byte_tokenizer(folder: Path) -> int:
    """Write a byte-level BPE tokenizer with a ChatML template to ``folder``; return its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<pad>", "<|im_start|>", "<|im_end|>"])}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>", bos_token=None
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return len(vocab)


def write_random_model(folder: Path, shape: dict[str, Any]) -> int:
    """Write a Llama of ``shape`` with seed-0 random weights and a byte tokenizer; return N."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    size = write_byte_tokenizer(folder)
    vocab = shape["vocab_size"] or size
    config = LlamaConfig(**{**shape, "vocab_size": vocab}, pad_token_id=0, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def step_model(args: argparse.Namespace) -> dict[str, Any]:
    """Find the policy's weights, or build random ones of the same shape."""
    folder = Path(args.work) / "model"
    if args.small:
        parameters = write_random_model(folder, TINY)
        return {
            "path": str(folder),
            "weights": "random, tiny (--small)",
            "parameters": parameters,
        }
    from skillrl.policies.transformers_loading import resolve_model_source
    from skillrl_core.errors import SkillRLError

    try:
        source = resolve_model_source(args.model)
    except SkillRLError as error:  # no GGUF, no gguf package: the shape is what is measured
        parameters = write_random_model(folder, SMOLLM2_135M)
        note = f"random, SmolLM2-135M-shaped ({args.model} not loadable: {error})"
        return {"path": str(folder), "weights": note, "parameters": parameters}
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(source)
    return {"path": source, "weights": args.model, "architecture": config.model_type}


def step_generation(args: argparse.Namespace) -> dict[str, Any]:
    """Free generation and candidate scoring at each batch size: tokens/s and candidates/s."""
    from skillrl.policies import PolicyConfig, SamplingConfig, load_policy

    policy = load_policy(
        PolicyConfig(model=args.model, device=args.device, workspace=Path(args.work))
    )
    sizes = SMALL if args.small else FULL
    sampling = SamplingConfig(max_new_tokens=sizes.new_tokens)
    candidates = [f"click[item {k}]" for k in range(sizes.candidates)]

    def chat(i: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"Goal {i}: buy a red ball under 20 dollars. Act."}]

    policy.generate([chat(0)], sampling)  # warm-up: first-call costs are not throughput
    rows = []
    for batch in sizes.generation_batches:
        conversations = [chat(i) for i in range(batch)]
        began = time.perf_counter()
        generations = policy.generate(conversations, sampling)
        generate_s = time.perf_counter() - began
        began = time.perf_counter()
        policy.score_continuations(conversations, [candidates] * batch)
        score_s = time.perf_counter() - began
        tokens = sum(g.completion_token_count for g in generations)
        rows.append(
            {
                "batch": batch,
                "generated_tokens": tokens,
                "generate_seconds": generate_s,
                "tokens_per_second": tokens / generate_s,
                "score_seconds": score_s,
                "candidates_per_second": batch * len(candidates) / score_s,
            }
        )
    return {
        "dtype": str(policy.model.dtype).removeprefix("torch."),
        "rows": rows,
        "peak_memory_mib": peak_memory_mib(args.device),
    }


def step_rollouts(args: argparse.Namespace) -> dict[str, Any]:
    """WebShop episodes played together by ``RolloutEngine``, skills off."""
    from skillrl.agents.llm import LLMAgent, LLMAgentConfig
    from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    sizes = SMALL if args.small else FULL
    policy = load_policy(
        PolicyConfig(model=args.model, device=args.device, workspace=Path(args.work))
    )
    sampling = SamplingConfig(max_new_tokens=sizes.new_tokens, stop=["</action>"])
    agent = LLMAgent(policy, config=LLMAgentConfig(sampling=sampling), uses_skills=False)
    config = RolloutConfig(max_turns=1, max_parallel=1)
    RolloutEngine(agent, config=config).run([EpisodeStart("webshop", "test", 0, seed=0)])
    rows = []
    for episodes in sizes.rollout_episodes:
        config = RolloutConfig(max_turns=sizes.rollout_turns, max_parallel=episodes)
        engine = RolloutEngine(agent, config=config)
        engine.run([EpisodeStart("webshop", "test", i, seed=i) for i in range(episodes)])
        stats = engine.stats.to_dict()
        rows.append({**stats, "episodes": episodes})
    return {"rows": rows, "peak_memory_mib": peak_memory_mib(args.device)}


STEPS = {"model": step_model, "generation": step_generation, "rollouts": step_rollouts}


def run_step(args: argparse.Namespace) -> None:
    """Child process: run one step, print its figures as the last line of output."""
    import torch

    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    else:
        torch.set_num_threads(args.threads)
    print(json.dumps(STEPS[args.step](args)), flush=True)


# --- the parent: every step under ``timeout``, failures logged and skipped --------------------


@dataclass
class StepResult:
    """One step's outcome."""

    name: str
    status: str
    """``ok``, ``failed`` (non-zero exit), ``timed out`` or ``skipped`` (its input is missing)."""
    seconds: float
    figures: dict[str, Any] | None = None
    log: str = ""
    """The tail of a failed step's output (or why it was skipped)."""


def timed(name: str, command: list[str], limit: int, env: dict[str, str]) -> StepResult:
    """Run ``command`` under ``timeout``; parse the last output line as JSON when it is one."""
    began = time.perf_counter()
    done = subprocess.run(
        ["timeout", "--kill-after=10", str(limit), *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - began
    output = (done.stdout + done.stderr).strip()
    if done.returncode in (124, 137):
        return StepResult(name, "timed out", seconds, log=f"after {limit} s\n{output[-1500:]}")
    if done.returncode != 0:
        return StepResult(name, "failed", seconds, log=output[-1500:])
    lines = done.stdout.strip().splitlines()
    try:
        figures = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        figures = None
    if not isinstance(figures, dict):
        figures = {"output": output[-1500:]}
    return StepResult(name, "ok", seconds, figures=figures)


def check(args: argparse.Namespace) -> dict[str, Any]:
    """Run every step; return the results file's content."""
    import torch

    run = provenance("gpu_check")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    card = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    sizes = SMALL if args.small else FULL
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu-check-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--device", device, "--work", str(work), "--threads", str(args.threads)]
    if args.small:
        common.append("--small")
    steps: list[StepResult] = []

    def log(result: StepResult) -> None:
        steps.append(result)
        print(f"{result.name}: {result.status} ({result.seconds:.0f} s)", file=sys.stderr)
        if result.status != "ok":
            print(result.log, file=sys.stderr)

    if shutil.which("nvidia-smi"):
        query = "--query-gpu=name,memory.total,driver_version"
        smi = ["nvidia-smi", query, "--format=csv,noheader"]
        log(timed("nvidia-smi", smi, TIMEOUTS["nvidia-smi"], env))
    else:
        log(StepResult("nvidia-smi", "skipped", 0.0, log="nvidia-smi is not on PATH"))
    found = timed(
        "model", [*me, "--step", "model", "--model", args.model, *common], TIMEOUTS["model"], env
    )
    log(found)
    model = found.figures["path"] if found.status == "ok" and found.figures else None

    def needs_model(name: str, command: list[str], limit: int) -> None:
        if model is None:
            log(StepResult(name, "skipped", 0.0, log="no model: the model step failed"))
            return
        log(timed(name, command, limit, env))

    throughput = str(HERE / "bench_train_throughput.py")
    for precision, flags in UPDATE_PRECISIONS.items():
        for mode in ("full", "lora"):
            name = f"update {precision} {mode}"
            if precision == "tf32" and device == "cpu":
                log(StepResult(name, "skipped", 0.0, log="TF32 exists only on CUDA"))
                continue
            command = [
                sys.executable, throughput, "--mode", mode, "--model", str(model),
                "--device", device, *flags, "--turns", str(sizes.update_turns),
                "--prompt-tokens", str(sizes.prompt_tokens),
                "--completion-tokens", str(sizes.completion_tokens),
                "--batch-size", str(sizes.batch_size), "--grad-accum", str(sizes.grad_accum),
                "--steps", str(sizes.update_steps), "--threads", str(args.threads),
            ]  # fmt: skip
            needs_model(name, command, TIMEOUTS["update"])
    for name in ("generation", "rollouts"):
        needs_model(name, [*me, "--step", name, "--model", str(model), *common], TIMEOUTS[name])
    cycle = [
        sys.executable, "-m", "cli", "train", "--workspace", str(work / "train"),
        "--model", str(model), "--no-skills", "--cycles", "1", "--run-name", "gpu-check",
        "--goals-per-cycle", str(sizes.cycle_goals), "--group-size", str(sizes.cycle_group),
        "--eval-goals", "1", "--max-turns", str(sizes.rollout_turns),
        "--max-new-tokens", str(sizes.new_tokens), "--threads", str(args.threads),
    ]  # fmt: skip
    needs_model("train cycle", cycle, TIMEOUTS["train cycle"])
    if steps[-1].status == "ok":
        from trainers.cycle.cycle_metrics import EVAL_EPISODES, TRAIN_EPISODES, TRAIN_MEAN_SCORE

        metrics = work / "train" / "runs" / "gpu-check" / "metrics.jsonl"
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        steps[-1].figures = {
            key: rows[-1][key]
            for key in (TRAIN_EPISODES, EVAL_EPISODES, TRAIN_MEAN_SCORE)
            if key in rows[-1]
        }
    marked = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in path.read_text(encoding="utf-8")
    )
    tests = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    if marked:
        log(timed("gpu tests", [*tests, *marked], TIMEOUTS["gpu tests"], env))
    else:
        log(StepResult("gpu tests", "skipped", 0.0, log="no test file is marked gpu"))
    if steps[-1].figures:
        summary = steps[-1].figures.get("output", "").splitlines()
        steps[-1].figures = {"summary": summary[-1] if summary else "", "files": marked}
    if importlib.util.find_spec("vllm") is None:
        log(StepResult("vllm", "skipped", 0.0, log="vllm is not installed"))
    else:
        probe = "import vllm; print(__import__('json').dumps({'version': vllm.__version__}))"
        log(timed("vllm", [sys.executable, "-c", probe], TIMEOUTS["vllm"], env))
    return {
        "provenance": run,
        "small": args.small,
        "device": device,
        "card": card,
        "bf16_peak_tflops": bf16_peak_tflops(card),
        "steps": [asdict(s) for s in steps],
    }


# --- the report ---------------------------------------------------------------------------


def _figures(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    for step in results["steps"]:
        if step["name"] == name and step["status"] == "ok":
            return step["figures"]
    return None


def report(results: dict[str, Any]) -> str:
    """A results file as Markdown: the steps' outcomes, then each step's figures."""
    where = "CPU" if results["device"] == "cpu" else f"CUDA, {results['card']}"
    size = "`--small` (tiny sizes)" if results["small"] else "full sizes"
    model = _figures(results, "model") or {}
    lines = [
        run_text(results),
        "",
        f"Device: {where}; {size}; weights: {model.get('weights', 'none (model step failed)')}.",
        "",
        "| step | outcome | seconds |",
        "| --- | --- | ---: |",
    ]
    for step in results["steps"]:
        outcome = step["status"]
        if step["status"] != "ok" and step["log"]:
            outcome += f": {step['log'].strip().splitlines()[-1][:90]}"
        lines.append(f"| {step['name']} | {outcome} | {step['seconds']:.0f} |")
    peak = results["bf16_peak_tflops"]
    memory = "peak GPU memory" if results["device"] == "cuda" else "peak RSS"
    against = f"against {peak:.0f} TFLOP/s dense bf16" if peak else "no bf16 peak known here"
    lines += [
        "",
        f"GRPO update (MFU: {against}). The first step's gradient norm is taken at the same "
        "weights on the same turns in every precision: its distance from fp32's is what the "
        "precision changes.",
        "",
        f"| run | tokens/s | s/step | {memory} | MFU | first-step grad norm (vs fp32) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for step in results["steps"]:
        row = step["figures"] if step["status"] == "ok" else None
        if not step["name"].startswith("update") or row is None:
            continue
        use = mfu(row["parameters"], row["tokens_per_second"], peak)
        mode = step["name"].rsplit(" ", 1)[-1]
        baseline = _figures(results, f"update fp32 {mode}")
        norm = f"{row['first_grad_norm']:.5g}"
        if baseline and baseline is not row and baseline["first_grad_norm"]:
            change = row["first_grad_norm"] / baseline["first_grad_norm"] - 1
            norm += f" ({change:+.2e})"
        lines.append(
            f"| {step['name'].removeprefix('update ')} | {row['tokens_per_second']:,.0f} "
            f"| {row['seconds_per_step']:.2f} | {row['peak_memory_mib']:,.0f} MiB "
            f"| {'n/a' if use is None else f'{use:.1%}'} | {norm} |"
        )
    generation = _figures(results, "generation")
    if generation:
        lines += [
            "",
            f"Generation (greedy) and candidate scoring, {generation['dtype']}, "
            f"{memory} {generation['peak_memory_mib']:,.0f} MiB.",
            "",
            "| batch | generated tokens/s | scored candidates/s |",
            "| ---: | ---: | ---: |",
        ]
        for row in generation["rows"]:
            lines.append(
                f"| {row['batch']} | {row['tokens_per_second']:,.1f} "
                f"| {row['candidates_per_second']:,.1f} |"
            )
    rollouts = _figures(results, "rollouts")
    if rollouts:
        lines += [
            "",
            f"WebShop rollouts, skills off, {memory} {rollouts['peak_memory_mib']:,.0f} MiB.",
            "",
            "| episodes together | wall s | episodes/min | generated tokens/s |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for row in rollouts["rows"]:
            lines.append(
                f"| {row['episodes']} | {row['wall_seconds']:.1f} "
                f"| {row['episodes_per_minute']:.1f} | {row['tokens_per_second']:.1f} |"
            )
    tests = _figures(results, "gpu tests")
    if tests:
        lines += ["", f"GPU-marked tests: {tests['summary']}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny sizes (runs on a CPU)")
    parser.add_argument(
        "--model", default="embedded", help="the policy (default: embedded; random if absent)"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads (CPU only)")
    parser.add_argument("--out", default=None, help="write the results JSON here")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp folder)")
    parser.add_argument("--step", choices=list(STEPS), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--device", choices=("cpu", "cuda"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        run_step(args)
        return
    results = check(args)
    print(report(results))
    if args.out:
        write_result(args.out, results, name="gpu_check")


if __name__ == "__main__":
    main()
