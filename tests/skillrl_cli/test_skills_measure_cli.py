"""``skillrl skills measure`` through the real entry point, with the scripted agent as its model.

Only the model is stood in for (``model_agent``, which loads it); options, the bank, the paired
rollouts, storing the figures and ``skills show`` are the real ones.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from paired_fakes import LEVER, NeedsEntryAgent

from cli import main
from memory import BankConfig, PairedEvidence, SkillBank
from memory.embedding import shared_embedder
from memory.types import EntryDraft


def _bank_with_two_entries(workspace) -> tuple[str, str]:
    with SkillBank.open(BankConfig(workspace=workspace), embedder=shared_embedder()) as bank:
        a = bank.add(EntryDraft(kind="general", title="Pull when asked", principle="Pull it."))
        b = bank.add(EntryDraft(kind="general", title="Keep a tidy desk", principle="Tidy up."))
    return a.entry.id, b.entry.id


def _paired(workspace, entry_id: str) -> PairedEvidence:
    with SkillBank.open(BankConfig(workspace=workspace), embedder=shared_embedder()) as bank:
        return bank.get(entry_id).paired


def test_measure_stores_the_pairs_and_show_prints_them(workspace, monkeypatch):
    a, b = _bank_with_two_entries(workspace)
    built = []

    def scripted(play, console, uses_skills):
        built.append((play.sampling.temperature, uses_skills))
        return NeedsEntryAgent(a)

    monkeypatch.setattr("skillrl_cli.run.model_agent", scripted)
    runner = CliRunner()
    args = ["skills", "measure", "--env", LEVER, "--goals", "8", "--workspace", str(workspace)]
    dry = runner.invoke(main, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["measured"][a]["utility"] == 1.0
    assert _paired(workspace, a) == PairedEvidence()  # a dry run stores nothing
    result = runner.invoke(main, [*args, "--entry", a[:8], "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["measured"]) == {a} and out["rollouts"] == 16
    assert out["measured"][a]["verdict"] == "helps"
    assert built == [(0.0, True)] * 2  # greedy, with skills
    assert _paired(workspace, a) == PairedEvidence(8, 8, 0, 8.0)
    assert _paired(workspace, b) == PairedEvidence()
    table = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*args])
    assert table.exit_code == 0, table.output
    assert "paired utility over 8 goals (24 rollouts)" in table.output
    shown = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["skills", "show", a, "--workspace", str(workspace)]
    )
    assert shown.exit_code == 0, shown.output
    assert "+1.00 success, +1.00 score over 16 pairs (16 succeeded only with it" in shown.output
    assert "McNemar p=0.000): helps" in shown.output
    shown = CliRunner().invoke(main, ["skills", "show", b, "--json", "--workspace", str(workspace)])
    paired = json.loads(shown.stdout)["paired"]
    assert paired["verdict"] == "does not help" and paired["utility"] == 0.0


def test_bad_options_are_refused_before_anything_plays(workspace, monkeypatch):
    _bank_with_two_entries(workspace)
    monkeypatch.setattr("skillrl_cli.run.model_agent", lambda *a: NeedsEntryAgent("x"))
    base = ["skills", "measure", "--env", LEVER, "--workspace", str(workspace)]
    past_the_end = CliRunner().invoke(main, [*base, "--goals", "99"])
    assert past_the_end.exit_code != 0 and "--goals" in past_the_end.output
    unknown = CliRunner().invoke(main, [*base, "--goals", "2", "--entry", "nosuchentry"])
    assert unknown.exit_code != 0 and "no skill-bank entry" in unknown.output
    assert "Traceback" not in past_the_end.output + unknown.output
