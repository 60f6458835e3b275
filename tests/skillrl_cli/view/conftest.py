"""A small workspace for the view: a bank of three entries, two episodes of one group, one run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory import BankConfig, EntryDraft, SkillBank
from memory.embedding import shared_embedder
from skillrl_core.records import EpisodeRecord, TurnRecord

SCRIPT_TITLE = "<script>window.pwned = 1</script> never run this"


@dataclass
class ViewWorkspace:
    """What the fixture made, by id."""

    root: Path
    bank: SkillBank
    size_id: str
    script_id: str
    episode_id: str


def _turn(
    turn: int, observation: str, action: str, retrieved: list[str], left_out: list[str] | None
) -> TurnRecord:
    return TurnRecord(turn=turn, observation=observation, available_actions=[action],
                      action=action, action_valid=True, reward=0.0,
                      model_output=f"<think>step {turn}</think> {action}",
                      retrieved_ids=retrieved, left_out_ids=left_out)  # fmt: skip


def _write_cycle(run: Path, winner: EpisodeRecord, loser: EpisodeRecord) -> None:
    """Cycle 1 of the run: grp-1 kept (with advantages), one group with no signal, one failed."""
    from trainers.cycle.config import CycleConfig
    from trainers.cycle.cycle_rollout import RolloutPhase
    from trainers.cycle.run_files import RunFiles
    from trainers.cycle.run_settings import run_settings
    from trainers.update.config import GRPOConfig
    from trainers.update.update_record import EpisodeAdvantage, TurnAdvantage, UpdateRecord

    def played(group: str, error: str = "") -> EpisodeRecord:
        turn = _turn(0, "<b>search page</b>", "search[<i>boots</i>]", [], [])
        return EpisodeRecord("webshop", "goal-9", "buy <boots>", "footwear", turns=[turn],
                             split="train", group_id=group, error=error)  # fmt: skip

    files = RunFiles(run)
    files.save_config(run_settings(CycleConfig(), GRPOConfig()))
    broken = played("broken", error="RuntimeError: <server> gone")
    episodes = [winner, loser, played("flat"), played("flat"), played("broken"), broken]
    files.save_rollout(1, RolloutPhase(episodes=episodes, kept_groups=["grp-1"], dropped_groups=1,
                                       failed_groups=1, goals_used=[7, 9, 9], cursor_end=3,
                                       seconds=1.0))  # fmt: skip
    won = [TurnAdvantage(i, r, s, 1.0 + 0.5 * s, "") for i, r, s in
           [(0, -0.01, 0.0), (1, -0.01, 0.25), (2, 0.99, 0.5)]]  # fmt: skip
    lost = [TurnAdvantage(0, -0.01, 0.0, -1.0, "action substituted: its tokens did not earn "
                                               "its reward")]  # fmt: skip
    files.save_update_record(1, UpdateRecord(step_weight=0.5, episodes=[
        EpisodeAdvantage(winner.episode_id, "grp-1", 0.97, 1.0, won),
        EpisodeAdvantage(loser.episode_id, "grp-1", -0.01, -1.0, lost),
    ]))  # fmt: skip


@pytest.fixture(scope="module")
def view_workspace(tmp_path_factory) -> Iterator[ViewWorkspace]:
    """A workspace with a bank, stored episodes and a ``runs/r1/metrics.jsonl``."""
    root = tmp_path_factory.mktemp("view-ws")
    bank = SkillBank.open(BankConfig(workspace=root), embedder=shared_embedder())
    size = bank.add(EntryDraft(kind="task", title="Pick the shoe size asked for",
                               principle="Click the size in the instruction before buying.",
                               env="webshop", category="footwear")).entry  # fmt: skip
    script_draft = EntryDraft(kind="general", title=SCRIPT_TITLE,
                              principle="<b>bold?</b> <img src=x onerror=alert(1)>")  # fmt: skip
    script = bank.add(script_draft).entry
    turns = [
        _turn(0, "WebShop search page <i>", "search[red shoes]", [size.id, script.id], []),
        # The prompt budget cut the script entry here: the page shows it struck out.
        _turn(1, "Results: red shoes size 9", "click[b0001]", [size.id], [script.id]),
        _turn(2, "Product page: size 9, $20", "click[buy now]", [], None),
    ]
    # Constrained decoding scored the result page's candidates (a page's text is untrusted).
    turns[1].candidate_scores = {"click[<b>b0002</b>]": -1.25, "click[b0001]": -0.5,
                                 "click[next >]": -2.0}  # fmt: skip
    winner = EpisodeRecord("webshop", "goal-7", "buy red shoes size 9", "footwear", turns=turns,
                           success=True, score=1.0, split="test", group_id="grp-1",
                           reward_breakdown={"r_att": 1.0, "attributes": {"<b>size</b>": 0.5}},
                           agent=f"transformers:{root}/runs/r1/checkpoints/cycle-0001")  # fmt: skip
    loser = EpisodeRecord("webshop", "goal-7", "buy red shoes size 9", "footwear",
                          turns=turns[:1], success=False, score=0.0, split="test",
                          group_id="grp-1", agent="expert")  # fmt: skip
    bank.trajectories.save_episodes([winner, loser])
    run = root / "runs" / "r1"
    run.mkdir(parents=True)
    rows = [{"cycle": 0, "eval.success_rate": 0.2, "eval.episodes": 10, "eval.mean_score": 0.4}]
    rows += [{"cycle": i, "eval.success_rate": 0.2 + 0.1 * i, "eval.episodes": 10,
              "eval.mean_score": 0.4 + 0.05 * i, "groups.kept": 3, "cycle.seconds": 90.0 * i,
              "update.loss": 0.1 / i} for i in range(1, 4)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _write_cycle(run, winner, loser)
    yield ViewWorkspace(root, bank, size.id, script.id, winner.episode_id)
    bank.close()
