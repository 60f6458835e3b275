"""Play the resume tests' training run in this process and SIGKILL it at a chosen point.

``python killed_run.py WORKSPACE rollout|save [--resume]``: ``rollout`` dies after the third
episode of cycle 1's rollout (turns retrieved, nothing committed); ``save`` dies inside cycle
1's checkpoint save, after the weights went into the temp folder. SIGKILL, unlike an
exception, runs no ``except``/``finally``: exactly what an out-of-memory kill or a closed
laptop does.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from test_cycle_resume import open_run

from trainers.common.phased_run import PhaseEnded, PhaseStarted
from trainers.cycle.run_files import CyclePhase


def die(*_args: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(workspace: Path, where: str, resume: bool) -> None:
    run, _bank = open_run(workspace)
    latest: list[PhaseStarted | PhaseEnded | None] = [None]

    def on_episode(done: int, total: int) -> None:
        if where == "rollout" and latest[0] == PhaseStarted(1, CyclePhase.ROLLOUT) and done == 3:
            die()

    def remember(event: PhaseStarted | PhaseEnded) -> None:
        latest[0] = event

    run.events.on(PhaseStarted, remember).on(PhaseEnded, remember)
    run.runner.on_episode = on_episode
    if where == "save":
        run.policy.tokenizer.save_pretrained = die
    run.run(resume=resume)
    sys.exit(3)  # not killed: the test's kill point was never reached


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], "--resume" in sys.argv[3:])
