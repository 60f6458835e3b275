"""``skillrl skills ...``: inspect and edit the skill bank.

Every command takes ``--workspace``, ``--database-url``, ``--chroma-url`` and ``--embedder`` (the
bank's location and model), prints rich tables by default and JSON with ``--json``. Bad input
(an unknown id, a malformed file, an invalid field) ends with a one-line message, exit code 1,
and the bank unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from memory.config import RetrievalConfig
from skillrl_cli.options import json_option
from skillrl_cli.skills_admin import ADMIN_COMMANDS
from skillrl_cli.skills_measure import measure
from skillrl_cli.skills_options import (
    KINDS,
    TEXT_FIELDS,
    author_option,
    bank_options,
)
from skillrl_cli.skills_view import (
    console,
    print_entries,
    print_entry,
    print_history,
    print_json,
    print_retrieved,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def skills() -> None:
    """Inspect and edit the skill bank (skills, counterfactual notes, history, snapshots)."""


@skills.command("list")
@click.option("--kind", type=click.Choice(KINDS), help="Only entries of this kind.")
@click.option("--env", help="Only entries of this environment.")
@click.option("--category", help="Only entries of this task category.")
@click.option(
    "--status",
    type=click.Choice(["active", "retired", "all"]),
    default="active",
    show_default=True,
    help="Only entries with this status.",
)
@click.option(
    "--sort",
    type=click.Choice(["created", "usage", "utility"]),
    default="created",
    show_default=True,
    help="Order: oldest first, most retrieved first, or most useful first (success lift).",
)
@json_option
@bank_options()
def list_command(bank: Any, kind, env, category, status, sort, as_json: bool) -> None:
    """List entries, filtered and sorted."""
    from memory.stats import ScopeTotals, entry_utility

    entries = bank.list(
        kind=kind, env=env, category=category, status=None if status == "all" else status
    )
    totals = ScopeTotals(bank)
    utility = {e.id: entry_utility(e, totals.of(e)) for e in entries}
    if sort == "usage":
        entries.sort(key=lambda e: (-e.times_retrieved, e.created_at))
    elif sort == "utility":
        entries.sort(key=lambda e: (-utility[e.id], e.created_at))
    if as_json:
        print_json([{**dataclasses.asdict(e), "utility": utility[e.id]} for e in entries])
    else:
        print_entries(entries, utility)


@skills.command("show")
@click.argument("entry_id")
@json_option
@bank_options()
def show(bank: Any, entry_id: str, as_json: bool) -> None:
    """Show one entry in full: content, provenance, statistics, paired utility and revisions.

    The paired utility comes from `skillrl skills measure`; its verdict is what bank upkeep
    (default thresholds) makes of it.
    """
    from skillrl.distill.upkeep import UpkeepConfig, paired_verdict

    entry = bank.get(entry_id)
    history = bank.history(entry_id)
    paired = entry.paired
    verdict = paired_verdict(paired, UpkeepConfig())
    if as_json:
        print_json(
            {
                **dataclasses.asdict(entry),
                "paired": {
                    "utility": paired.utility,
                    "score_delta": paired.score_delta,
                    "p_value": paired.p_value,
                    "verdict": verdict,
                },
                "revisions": [dataclasses.asdict(r) for r in history],
            }
        )
    else:
        print_entry(entry, history, verdict)


_RETRIEVAL = RetrievalConfig()
"""The retrieval a turn uses; ``search``'s defaults are its values."""


@skills.command("search")
@click.argument("text", callback=lambda _ctx, _param, value: _query_text(value))
@click.option("--env", default=DEFAULT_ENV, show_default=True, help="Environment of the query.")
@click.option("--category", help="Task category of the query (selects task skills).")
@click.option("--observation", default="", help="Observation text to add to the query.")
@click.option("--k-general", type=int, default=_RETRIEVAL.k_general, show_default=True,
              help="General skills.")  # fmt: skip
@click.option("--k-task", type=int, default=_RETRIEVAL.k_task, show_default=True,
              help="Task skills.")  # fmt: skip
@click.option("--k-mistakes", type=int, default=_RETRIEVAL.k_mistakes, show_default=True,
              help="Notes.")  # fmt: skip
@click.option("--k-cases", type=int, default=_RETRIEVAL.k_cases, show_default=True,
              help="Cases (what solved a similar request), by the request alone.")  # fmt: skip
@click.option("--min-similarity", type=float, default=_RETRIEVAL.min_similarity,
              show_default=True, help="Cosine cut-off.")  # fmt: skip
@click.option("--case-fit-margin", type=float, default=_RETRIEVAL.case_fit_margin,
              show_default=True,
              help="Cases this close to the nearest request's compete on the options TEXT names "
                   "(0: the nearest request's cases only).")  # fmt: skip
@json_option
@bank_options()
def search(bank: Any, text, env, category, observation, k_general, k_task, k_mistakes, k_cases,
           min_similarity, case_fit_margin, as_json: bool) -> None:  # fmt: skip
    """Show what retrieval would return for TEXT (an instruction); usage is not recorded.

    Asked as a turn of ENV asks: cases with the option values TEXT names, as the environment
    reads them.
    """
    import envs
    from memory import RetrievalQuery

    config = RetrievalConfig(
        k_general=k_general,
        k_task=k_task,
        k_mistakes=k_mistakes,
        min_similarity=min_similarity,
        k_cases=k_cases,
        case_fit_margin=case_fit_margin,
    )
    wants = envs.wanted_values(env, text)
    query = RetrievalQuery(
        instruction=text, observation=observation, env=env, category=category, wants=wants
    )
    result = bank.retrieve([query], config, record=False)[0]
    if as_json:
        print_json(
            {
                "wants": list(wants),
                **{
                    kind: [
                        {"id": r.entry.id, "title": r.entry.title, "similarity": r.similarity}
                        for r in getattr(result, kind)
                    ]
                    for kind in ("general", "task", "mistakes", "cases")
                },
            }
        )
    else:
        print_retrieved(result)


def _query_text(value: str) -> str:
    if not value.strip():
        raise click.BadParameter("the query text is empty; give an instruction to search for")
    return value


def _field_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for name, text in reversed(TEXT_FIELDS):
        command = click.option(f"--{name.replace('_', '-')}", name, default=None, help=text)(
            command
        )
    return command


@skills.command("add")
@click.option("--kind", type=click.Choice(KINDS), required=True, help="Kind of entry.")
@_field_options
@author_option("Who adds it.")
@click.option("--reason", default="", help="Why it is added.")
@json_option
@bank_options(changes=True, writes_entries=True)
def add(bank: Any, kind: str, author: str, reason: str, as_json: bool, **fields: Any) -> None:
    """Add an entry (a near-duplicate of an active one merges into it instead)."""
    from memory import EntryDraft

    values = {k: v for k, v in fields.items() if v is not None}
    draft = EntryDraft(
        kind=kind,  # type: ignore[arg-type]
        title=values.pop("title", ""),
        principle=values.pop("principle", ""),
        source="person",
        reason=reason,
        **values,
    )
    result = bank.add(draft, author=author)
    if as_json:
        print_json(
            {"id": result.entry.id, "merged": result.merged, "similarity": result.similarity}
        )
    elif result.merged:
        console().print(
            f"merged into [bold]{result.entry.id}[/] (similarity {result.similarity:.3f}, "
            f"support {result.entry.support_count})"
        )
    else:
        console().print(f"added [bold]{result.entry.id}[/]")


def _edit_in_editor(bank: Any, entry_id: str) -> dict[str, Any]:
    import yaml

    from memory.entries import EDITABLE_FIELDS
    from skillrl_core.errors import InvalidEntryError

    entry = bank.get(entry_id)
    current = {name: getattr(entry, name) for name in sorted(EDITABLE_FIELDS)}
    header = "# Edit the fields below, save and quit. Unchanged fields are kept.\n"
    try:
        edited = click.edit(header + yaml.safe_dump(current, sort_keys=True, allow_unicode=True))
    except UnicodeDecodeError as e:  # the editor saved bytes that are not UTF-8 text
        raise InvalidEntryError(
            f"the edited text is not UTF-8 (byte {e.start}: {e.reason}); nothing was saved"
        ) from e
    if edited is None:
        return {}
    try:
        data = yaml.safe_load(edited)
    except yaml.YAMLError as e:
        raise InvalidEntryError(f"the edited text is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise InvalidEntryError("the edited text must be a mapping of field: value")
    unknown = sorted(set(data) - EDITABLE_FIELDS)
    if unknown:
        raise InvalidEntryError(f"unknown field(s) {', '.join(map(str, unknown))}")
    return {k: v for k, v in data.items() if current.get(k) != v}


@skills.command("edit")
@click.argument("entry_id")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="New kind.")
@_field_options
@author_option("Who edits it.")
@click.option("--reason", default="", help="Why it is edited (kept in its history).")
@json_option
@bank_options(changes=True, writes_entries=True)
def edit(bank: Any, entry_id: str, author: str, reason: str, as_json: bool, **fields: Any) -> None:
    """Edit an entry with flags, or without flags in $EDITOR (YAML), validated before saving."""
    changes = {k: v for k, v in fields.items() if v is not None}
    if not changes:
        changes = _edit_in_editor(bank, entry_id)
    if not changes:
        console().print("nothing changed")
        return
    entry = bank.edit(entry_id, author=author, reason=reason, **changes)
    if as_json:
        print_json(dataclasses.asdict(entry))
    else:
        console().print(f"edited [bold]{entry.id}[/] (revision {entry.revision})")


@skills.command("retire")
@click.argument("entry_id")
@author_option("Who retires it.")
@click.option("--reason", default="", help="Why (kept in its history).")
@json_option
@bank_options(changes=True)
def retire(bank: Any, entry_id: str, author: str, reason: str, as_json: bool) -> None:
    """Take an entry out of retrieval (kept with its history; `restore` undoes it)."""
    entry = bank.retire(entry_id, author=author, reason=reason)
    _report_status(entry, as_json)


@skills.command("restore")
@click.argument("entry_id")
@author_option("Who restores it.")
@click.option("--reason", default="", help="Why (kept in its history).")
@json_option
@bank_options(changes=True)
def restore(bank: Any, entry_id: str, author: str, reason: str, as_json: bool) -> None:
    """Put a retired entry back into retrieval."""
    entry = bank.restore(entry_id, author=author, reason=reason)
    _report_status(entry, as_json)


def _report_status(entry: Any, as_json: bool) -> None:
    if as_json:
        print_json({"id": entry.id, "status": entry.status, "revision": entry.revision})
    else:
        console().print(f"[bold]{entry.id}[/] is now {entry.status} (revision {entry.revision})")


@skills.command("rm")
@click.argument("entry_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@bank_options(changes=True)
def rm(bank: Any, entry_id: str, yes: bool, as_json: bool) -> None:
    """Delete an entry and its history for good (prefer `retire`)."""
    entry = bank.get(entry_id)
    if not yes and not click.confirm(f"Delete {entry.id} ({entry.title!r}) for good?"):
        raise click.ClickException("not deleted")
    bank.remove(entry_id)
    if as_json:
        print_json({"id": entry_id, "deleted": True})
    else:
        console().print(f"deleted [bold]{entry_id}[/]")


@skills.command("history")
@click.argument("entry_id")
@json_option
@bank_options()
def history(bank: Any, entry_id: str, as_json: bool) -> None:
    """List every revision of an entry (who, when, why, what)."""
    revisions = bank.history(entry_id)
    if as_json:
        print_json([dataclasses.asdict(r) for r in revisions])
    else:
        print_history(revisions)


# "-1" is a revision number to refuse by range, not an unknown option.
@skills.command("revert", context_settings={"ignore_unknown_options": True})
@click.argument("entry_id")
@click.argument("revision", type=click.IntRange(min=1))
@author_option("Who reverts it.")
@json_option
@bank_options(changes=True)
def revert(bank: Any, entry_id: str, revision: int, author: str, as_json: bool) -> None:
    """Make revision REVISION of an entry current again (as a new revision)."""
    entry = bank.revert(entry_id, revision, author=author)
    if as_json:
        print_json(dataclasses.asdict(entry))
    else:
        console().print(
            f"[bold]{entry.id}[/] reverted to revision {revision} (now revision {entry.revision})"
        )


for _command in [*ADMIN_COMMANDS, measure]:
    skills.add_command(_command)
