"""What every benchmark shares: machine figures, timing, result files that say how they were made.

Not a benchmark itself (``python -m benchmarks`` lists ``bench_*.py`` only). A script imports it
by module name (``from harness import ...``): both ways of running a script put this folder on
``sys.path`` (``python benchmarks/bench_NAME.py`` as the script's own folder,
``python -m benchmarks NAME`` explicitly).

- :func:`machine`: the fp32 matmul rate, load average and core count, printed beside every time
  figure: on a shared CPU a figure means little without how busy the machine was.
- :func:`provenance`: the command, the commit (``+dirty`` for uncommitted changes to tracked
  files) and the machine at the start; a result file carries it so a figure can be reproduced.
- :class:`Stopwatch`: wall and process-CPU seconds of one block.
- :func:`write_result`: a result file, written atomically, with the provenance and the machine at
  its end.
- :func:`add_device_options`, :func:`start_device`, :func:`peak_memory_mib`,
  :func:`device_label`: ``--device``/``--bf16``/``--tf32`` for the speed benchmarks; threads are
  set only on a CPU, TF32 only on CUDA, and peak memory is the GPU allocator's on CUDA
  (``torch.cuda.max_memory_allocated``), the process's resident set on a CPU (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillrl_core.files import atomic_write_json

HERE = Path(__file__).resolve().parent


def waiting_parent() -> dict[str, str]:
    """Make this process a quiet parent of heavy child processes; return the children's env.

    A benchmark that runs its arms as child processes only measures and waits. Under
    ``OMP_WAIT_POLICY=ACTIVE`` (which the training scripts set) its own OpenMP threads, once
    its matmul rate is measured, would spin on the cores the child computes on: one arm of
    ``bench_train_speed`` ran at half speed so. Call it before torch is first imported (OpenMP
    reads the variable then); the children keep the environment this process started with.
    """
    children = {**os.environ, "HF_HUB_OFFLINE": "1"}
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return children


def matmul_gflops(size: int = 1024, repeats: int = 10, dtype: str = "float32") -> float:
    """``size`` x ``size`` matmul GFLOP/s in ``dtype`` (best of ``repeats``, after one warm-up)."""
    # Imported here: the report renderers and the tests import this module without needing torch.
    import torch

    kind = getattr(torch, dtype)
    a, b = torch.randn(size, size).to(kind), torch.randn(size, size).to(kind)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - began)
    return 2 * size**3 / best / 1e9


def machine() -> dict[str, Any]:
    """The machine now: matmul GFLOP/s, 1-minute load average and CPU cores."""
    return {
        "matmul_gflops": round(matmul_gflops(), 1),
        "load_average": os.getloadavg()[0],
        "cores": os.cpu_count(),
    }


def machine_text(figures: dict[str, Any]) -> str:
    """A :func:`machine` dict as printed beside time figures."""
    return f"matmul {figures['matmul_gflops']:.0f} GFLOP/s, load {figures['load_average']:.2f}"


def run_text(results: dict[str, Any]) -> str:
    """A results file's provenance as one Markdown line: command, commit, machine at both ends."""
    run = results["provenance"]
    commit_id = (run.get("commit") or "unknown")[:7]
    text = f"`{portable_command(run['command'])}` (commit `{commit_id}`, {run['started'][:10]}); "
    text += "machine at start: "
    text += machine_text(run["machine_at_start"])
    if "machine_at_end" in results:
        text += f", at the end: {machine_text(results['machine_at_end'])}"
    return text


def command(name: str) -> str:
    """The command line that runs benchmark ``name`` with this process's options (portable)."""
    args = " ".join(["python -m benchmarks", name, *map(shlex.quote, sys.argv[1:])])
    return portable_command(args)


REPOSITORY_TOP = ("skillrl/", "benchmarks/", "docs/", "envs/", "memory/", "trainers/", "tests/")
"""Top-level folders of this repository: an absolute path through one of them is written from
there on (a checkout's own location is the machine's, not the command's)."""

ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/'\"=]+/)*[^\s/'\"=]*")


def portable_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's parsed options as kept in its result: each path made machine-neutral."""
    return {k: portable_command(v) if isinstance(v, str) else v for k, v in arguments.items()}


def portable_command(text: str) -> str:
    """``text`` with every absolute path made machine-neutral.

    A path through a repository folder keeps its part from that folder on (``/x/wt/skillrl/
    adapters/webshop`` -> ``skillrl/adapters/webshop``); any other keeps its last component under
    ``out/`` (``/work/evidence/grpo/arms`` -> ``out/arms``), as the run's output folder.
    """

    def neutral(match: re.Match[str]) -> str:
        path = match.group(0)
        for top in REPOSITORY_TOP:
            at = path.find("/" + top)
            if at >= 0:
                return path[at + 1 :]
        last = path.rstrip("/").rsplit("/", 1)[-1]
        return f"out/{last}" if last else path

    return ABSOLUTE_PATH.sub(neutral, text)


def commit() -> str | None:
    """``git rev-parse HEAD`` of the repository holding benchmarks/, ``+dirty`` if changed.

    Untracked files do not count (a results folder inside the checkout is not a change to the
    code). ``None`` without git or outside a repository: a benchmark never fails for lack of it.
    """

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, check=True, timeout=30
        )
        return done.stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if changed else head


def provenance(name: str) -> dict[str, Any]:
    """How a result of benchmark ``name`` is being made: command, commit, start time, machine."""
    return {
        "command": command(name),
        "commit": commit(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine_at_start": machine(),
    }


class Stopwatch:
    """Wall seconds (``perf_counter``) and process CPU seconds (``process_time``) of a block.

    ``with Stopwatch() as clock: ...`` then ``clock.wall`` and ``clock.cpu``; read inside the
    block they give the time so far.
    """

    def __init__(self) -> None:
        self._start: tuple[float, float] | None = None
        self._stop: tuple[float, float] | None = None

    def __enter__(self) -> Stopwatch:
        # CPU first on the way in and last on the way out: the wall interval holds no
        # process_time call.
        cpu = time.process_time()
        self._start = (time.perf_counter(), cpu)
        self._stop = None
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter()
        self._stop = (wall, time.process_time())

    def _now(self) -> tuple[float, float]:
        if self._start is None:
            raise RuntimeError("the stopwatch was never started: use it as `with Stopwatch()`")
        return self._stop or (time.perf_counter(), time.process_time())

    @property
    def wall(self) -> float:
        """Wall seconds from entering the block to leaving it (or to now, inside it)."""
        return self._now()[0] - self._start[0]

    @property
    def cpu(self) -> float:
        """CPU seconds this process spent (all its threads) over the same interval."""
        return self._now()[1] - self._start[1]


def write_result(path: str | os.PathLike[str], results: dict[str, Any], *, name: str) -> Path:
    """Write ``results`` as JSON at ``path`` atomically, with ``provenance`` and ``machine_at_end``.

    ``results`` gains ``provenance(name)`` unless it holds one already, so a benchmark that
    writes the same dict after every step (or resumes from its file) keeps the first: call
    :func:`provenance` at the start and put it in ``results`` for a true start time.
    ``machine_at_end`` is measured at every write. Values JSON cannot hold (a ``Path``) are
    written as their ``str``: a long run is never lost at its last line. Keys keep the order the
    benchmark built them in.
    """
    results.setdefault("provenance", provenance(name))
    data = json.loads(json.dumps({**results, "machine_at_end": machine()}, default=str))
    target = Path(path)
    atomic_write_json(target, data, sort_keys=False)
    return target


DEVICES = ("cpu", "cuda")
"""What ``--device`` takes."""


def add_device_options(
    parser: argparse.ArgumentParser,
    *,
    bf16_help: str = "bf16 autocast over the update's forwards (weights, optimizer in float32)",
    bf16_default: bool | None = False,
) -> None:
    """Add ``--device``, ``--bf16`` and ``--tf32`` to a speed benchmark's parser."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=None,
        help="where the model runs (default: cuda when a GPU is visible, else cpu)",
    )
    parser.add_argument(
        "--bf16", action=argparse.BooleanOptionalAction, default=bf16_default, help=bf16_help
    )
    parser.add_argument(
        "--tf32",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="TF32 tensor cores for float32 products on CUDA (no effect on a CPU)",
    )


def resolve_device(parser: argparse.ArgumentParser, name: str | None) -> str:
    """``--device``'s value, its default filled in; a parser error for cuda without a GPU."""
    import torch

    if name is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here; use --device cpu")
    return name


def start_device(device: str, *, threads: int | None, tf32: bool) -> None:
    """Set up ``device`` for a measurement: CPU threads on a CPU; TF32 and a fresh peak on CUDA.

    ``threads`` is ignored on CUDA (the host threads only launch kernels there).
    """
    import torch

    if device == "cpu":
        if threads:
            torch.set_num_threads(threads)
        return
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.cuda.reset_peak_memory_stats()


def peak_memory_mib(device: str) -> float:
    """Peak memory so far in MiB: GPU memory allocated by torch on CUDA, resident set on a CPU."""
    if device == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_source(device: str) -> str:
    """What :func:`peak_memory_mib` measures on ``device``, for a table's header."""
    return "peak GPU memory" if device == "cuda" else "peak RSS"


def device_name(device: str) -> str:
    """The card's name on CUDA (``NVIDIA H200``), ``cpu`` otherwise."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return "cpu"


def device_label(
    device: str,
    *,
    bf16: bool,
    tf32: bool,
    threads: int | None = None,
    bf16_text: str = "bf16 autocast",
) -> str:
    """How a measurement ran, for a results line: the device and the precision of its products.

    ``bf16_text`` says what bf16 meant (autocast in an update, bf16 weights in a rollout).
    """
    if device == "cuda":
        where = f"CUDA ({device_name(device)})"
        precision = bf16_text if bf16 else ("fp32 with TF32" if tf32 else "fp32")
    else:
        where = f"CPU ({threads} threads)" if threads else "CPU"
        precision = bf16_text if bf16 else "fp32"
    return f"{precision} on {where}"
