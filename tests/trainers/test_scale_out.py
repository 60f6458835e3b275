"""Training under a launcher (``torchrun``, two CPU processes, gloo) ends as it does in one.

The same short run (cycle 0 and two improvement cycles, scripted policy over a tiny Llama, a
real bank) is played by one process and by two: the bank must hold the same entries and
episodes, and the weights must be the same update. The scripted actions hash the prompt, which
holds the retrieved skills, so cycle 2's episodes match only if the second process retrieved
the entries the main process distilled in cycle 1. The two-process run uses half the
per-process batch, so both take optimizer steps over the same turns (global batch = per-process
batch x processes): with DDP averaging the gradients and the ``dapo`` normaliser counting the
step's tokens over both processes, the update is the one-process update up to float summation
order.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fake_policy import tiny_causal_lm
from safetensors.torch import load_file
from tiny_checkpoint import write_tiny_checkpoint

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

# Float32 sums in a different order (two halves all-reduced instead of one sum) differ by about
# 1e-7 relative; Adam divides by the gradient's own size, which can magnify that for a
# component whose gradient is close to zero. One cycle's measured difference is ~3e-7 of the
# update; 1e-4 leaves room for that while a wrong loss normaliser (per-process token counts) or
# different training turns on a process changes the update by far more than 1e-4 of it.
RELATIVE_TOLERANCE = 1e-4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(args: list[str], processes: int) -> list[str]:
    if processes == 1:
        return [sys.executable, *args]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    return [*launcher, "--master_addr", "127.0.0.1", "--master_port", str(free_port()), *args]


def child_env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), str(HERE)])
    # One thread per process: the two-process run would otherwise oversubscribe the cores.
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def start(args: list[str], processes: int, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command(args, processes),
        env=child_env(),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(child: subprocess.Popen, timeout: float = 240) -> str:
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        output, _ = child.communicate()
        pytest.fail(f"timed out (a process waiting at a collective?):\n{output[-3000:]}")
    assert child.returncode == 0, output[-3000:]
    return output


def relative_difference(a: dict, b: dict, start: dict) -> float:
    """||a - b|| / ||a - start|| over all weights: how far apart two updates of ``start`` are."""
    apart = sum(float(((a[k] - b[k]) ** 2).sum()) for k in a) ** 0.5
    moved = sum(float(((a[k] - start[k]) ** 2).sum()) for k in a) ** 0.5
    assert moved > 0, "the update changed nothing: the test would not see a difference"
    return apart / moved


def test_two_processes_end_with_the_same_bank_and_weights_as_one(tmp_path):
    script = str(HERE / "scale_out_run.py")
    runs = {n: (tmp_path / f"ws{n}", tmp_path / f"out{n}") for n in (1, 2)}
    # One process with 4 turns per micro-batch, two with 2 each: the same global batch.
    children = {
        n: start([script, str(ws), str(out), str(4 // n)], n, tmp_path)
        for n, (ws, out) in runs.items()
    }
    for child in children.values():
        finish(child)
    (_, one), (_, two) = runs[1], runs[2]

    shares = [json.loads((two / f"process-{i}.json").read_text()) for i in (0, 1)]
    assert [(s["index"], s["count"]) for s in shares] == [(0, 2), (1, 2)]
    trained = json.loads((one / "process-0.json").read_text())["samples"]
    assert trained[0] > 0 and all(s["samples"] == trained for s in shares)

    bank_one = json.loads((one / "bank.json").read_text())
    bank_two = json.loads((two / "bank.json").read_text())
    assert bank_one["episodes"] > 0 and bank_one["entries"] > 0
    assert bank_two == bank_one  # entries, their counters, snapshots and every stored episode

    history_one = json.loads((one / "history.json").read_text())
    history_two = json.loads((two / "history.json").read_text())
    assert [row["cycle"] for row in history_two] == [0, 1, 2]
    for cycle in (1, 2):
        for key in ("groups.kept", "train.episodes", "eval.mean_score", "bank.size"):
            assert history_two[cycle][key] == history_one[cycle][key], (cycle, key)
        # The gradient after averaging is the whole step's: same norm (a scale error shows
        # here, where Adam's scale invariance could hide it in the weights).
        assert history_two[cycle]["update.grad_norm"] == pytest.approx(
            history_one[cycle]["update.grad_norm"], rel=1e-5
        )

    start_weights = tiny_causal_lm().state_dict()
    weights_one = load_file(str(one / "weights.safetensors"))
    weights_two = load_file(str(two / "weights.safetensors"))
    assert relative_difference(weights_one, weights_two, start_weights) < RELATIVE_TOLERANCE

    # A step whose one turn went to the first process: the second joined with a zero gradient.
    step_start = tiny_causal_lm(seed=1).state_dict()
    step_one = load_file(str(one / "step.safetensors"))
    step_two = load_file(str(two / "step.safetensors"))
    assert relative_difference(step_one, step_two, step_start) < RELATIVE_TOLERANCE
    norms = [json.loads((out / "step.json").read_text())["grad_norm"] for out in (one, two)]
    assert norms[1] == pytest.approx(norms[0], rel=1e-5)


def test_skillrl_train_under_torchrun_shares_one_run_folder(tmp_path):
    model = write_tiny_checkpoint(tmp_path / "model")
    ws = tmp_path / "ws"
    args = [
        "-m",
        "cli",
        "train",
        "--workspace",
        str(ws),
        "--model",
        str(model),
        "--no-skills",
        "--cycles",
        "1",
        "--goals-per-cycle",
        "2",
        "--group-size",
        "2",
        "--eval-goals",
        "1",
        "--max-turns",
        "2",
        "--max-new-tokens",
        "4",
        "--run-name",
        "ddp",
        "--threads",
        "1",
    ]
    output = finish(start(args, 2, tmp_path))
    assert "already holds a run" not in output
    run = ws / "runs" / "ddp"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["cycle"] for r in rows] == [0, 1]
    assert rows[1]["train.episodes"] >= 4 and rows[1]["eval.episodes"] == 1
    assert (run / "checkpoints" / "cycle-0001" / "model.safetensors").exists()
    # The folder is refused again, now that it holds a run: by both processes, in one line
    # each and no traceback of ours (the launcher prints its own, naming the failed children).
    again = start(args, 2, tmp_path)
    output, _ = again.communicate(timeout=120)
    assert again.returncode != 0
    refusals = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(refusals) == 2 and all("already holds a run" in line for line in refusals)
    assert "CheckpointError" not in output  # the problem in words, not a class name
    ours = [  # frames of this project's code (a venv inside the checkout holds the launcher's)
        line
        for line in output.splitlines()
        if f'File "{ROOT}' in line and "site-packages" not in line
    ]
    assert not ours


def test_one_process_is_told_it_is_alone():
    from skillrl_core.errors import ConfigError
    from trainers.cycle.processes import Processes

    alone = Processes.current() if not torch.distributed.is_initialized() else Processes()
    assert (alone.index, alone.count, alone.is_main, alone.distributed) == (0, 1, True, False)
    assert alone.share([3, 1, 2]) == [3, 1, 2]
    assert alone.all_gather("x") == ["x"]
    assert alone.from_main(lambda: 7) == 7
    assert Processes(index=1, count=3).share(list(range(7))) == [1, 4]
    with pytest.raises(ConfigError, match=r"process index \(2\)"):
        Processes(index=2, count=2)
