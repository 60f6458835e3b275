"""Which process this is when training runs under ``accelerate launch`` / ``torchrun``.

A thin layer over accelerate's :class:`~accelerate.PartialState` (it reads the launcher's
``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` and starts the process group: gloo on CPU, nccl on
GPUs) and its object collectives. Without a launcher there is one process, every call is local
and nothing is communicated, so a plain ``skillrl train`` behaves as it always did.

The division of labour the training cycle follows (``docs/ARCHITECTURE.md``): the main process
owns the run folder and every bank write; all processes roll out their share of the groups and
train data-parallel; what the main process needs from the others is gathered to every process
(``all_gather_object``), so that every process takes the same decisions from the same data.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from skillrl_core.errors import ConfigError, SkillRLError

logger = logging.getLogger(__name__)

T = TypeVar("T")

WAIT_TIMEOUT = datetime.timedelta(hours=6)
"""How long a process waits at a collective. The others wait while the main process evaluates,
distills and saves, which on a large run takes far longer than torch's default 30 minutes."""


@dataclass(frozen=True)
class Processes:
    """Where a process stands among the launcher's processes (index 0 of 1 without a launcher)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ConfigError(f"process index ({self.index}) must be in [0, count={self.count})")

    @classmethod
    def current(cls) -> Processes:
        """Return this process's place, starting the process group under a launcher.

        ``PartialState`` is accelerate's process-wide singleton: the ``Accelerator`` the GRPO
        trainer makes later reuses it, so the process group is started once. ``cpu`` is chosen
        as the trainer chooses it, since the singleton refuses a second, different choice.
        """
        import torch
        from accelerate import PartialState

        state = PartialState(cpu=not torch.cuda.is_available(), timeout=WAIT_TIMEOUT)
        return cls(index=state.process_index, count=state.num_processes)

    @property
    def is_main(self) -> bool:
        """Whether this is the process that owns the run folder and the bank writes."""
        return self.index == 0

    @property
    def distributed(self) -> bool:
        """Whether more than one process takes part."""
        return self.count > 1

    def share(self, items: Sequence[T]) -> list[T]:
        """Return this process's share of ``items``: every ``count``-th, from ``index`` on.

        Deterministic and the same split in every process, so the shares partition ``items``.
        """
        return list(items[self.index :: self.count])

    def wait(self) -> None:
        """Wait until every process gets here (a no-op for one process)."""
        if self.distributed:
            from accelerate import PartialState

            PartialState().wait_for_everyone()

    def all_gather(self, value: T) -> list[T]:
        """Return every process's ``value``, in process order (``[value]`` for one process)."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.count
        dist.all_gather_object(gathered, value)
        return gathered

    def from_main(self, compute: Callable[[], T]) -> T:
        """Run ``compute`` on the main process only and return its result in every process.

        A :class:`SkillRLError` raised on the main process (a refused run folder, a bad
        setting) is raised in every process, so the others stop too instead of waiting forever
        for a main process that has given up.
        """
        if not self.distributed:
            return compute()
        outcome: list[Any] = [None]
        if self.is_main:
            try:
                outcome = [("ok", compute())]
            except SkillRLError as error:
                outcome = [("error", error)]
                _broadcast(outcome)
                raise
        _broadcast(outcome)
        kind, value = outcome[0]
        if kind == "error":
            raise value
        return value

    @contextmanager
    def main_first(self) -> Iterator[None]:
        """Let the main process do the block first (e.g. create the bank), then the others."""
        if not self.is_main:
            self.wait()
        yield
        if self.is_main:
            self.wait()


def _broadcast(holder: list[Any]) -> None:
    import torch.distributed as dist

    dist.broadcast_object_list(holder, src=0)
