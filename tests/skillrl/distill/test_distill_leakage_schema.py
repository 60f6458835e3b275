from __future__ import annotations

import pytest
from distill_episodes import episode

from memory.types import EntryDraft
from skillrl.distill.leakage import draft_leaks, find_leaks
from skillrl.distill.schema import SchemaViolation, extract_json, parse_entries


@pytest.mark.parametrize(
    "text",
    [
        "buy B09QKP7XQL",
        "click[b07hrfsnl4] then buy",
        "it costs $24",
        "under 40 dollars",
        "priced 24.99 at most",
    ],
)
def test_product_ids_and_prices_leak(text):
    assert find_leaks(text)


def test_general_wording_does_not_leak():
    assert find_leaks("Select size large before Buy Now; stay under the price bound") == []
    assert find_leaks("chose size 2.65 ounce while the goal asked for 25.30 fl oz") == []


def test_episode_specifics_leak():
    ep = episode(success=True, chosen={"size": "large"})
    copied = EntryDraft(
        kind="task", title="t", principle="i need a slim fit long sleeve dress shirt in large"
    )
    assert any("copies" in r for r in draft_leaks(copied, [ep]))
    titled = EntryDraft(
        kind="task", title="t", principle="buy the Men's Slim Fit Long Sleeve Dress Shirt"
    )
    assert any("title" in r for r in draft_leaks(titled, [ep]))


def test_extract_json_from_fences_and_chatter():
    assert extract_json('Sure!\n```json\n{"entries": []}\n```') == {"entries": []}
    assert extract_json('Here: {"entries": []} hope it helps') == {"entries": []}
    with pytest.raises(SchemaViolation, match="no JSON object"):
        extract_json("I cannot help with that")
    with pytest.raises(SchemaViolation, match="invalid JSON"):
        extract_json('{"entries": [}')


def test_parse_entries_builds_drafts_and_names_the_bad_field():
    text = (
        '{"entries": [{"kind": "task", "title": "Set the size", "principle": "Pick it."},'
        ' {"kind": "general", "title": "Verify", "principle": "Check."}]}'
    )
    task, general = parse_entries(text, env="webshop", category="fashion")
    assert (task.env, task.category, task.source) == ("webshop", "fashion", "distiller:teacher")
    assert (general.env, general.category) == (None, None)
    with pytest.raises(SchemaViolation, match=r"entries\[0\]\.correction is required"):
        parse_entries(
            '{"entries": [{"kind": "mistake", "title": "a", "principle": "b",'
            ' "failure_point": "c", "flawed_action": "d"}]}',
            env="w",
            category="c",
        )
    with pytest.raises(SchemaViolation, match=r"entries\[0\]\.kind must be one of"):
        parse_entries(
            '{"entries": [{"kind": "tip", "title": "a", "principle": "b"}]}', env="w", category="c"
        )
    with pytest.raises(SchemaViolation, match='"entries" list'):
        parse_entries('[{"kind": "task"}]', env="w", category="c")
