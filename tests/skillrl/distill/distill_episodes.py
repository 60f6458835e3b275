"""Hand-built WebShop-shaped episodes for the distiller tests (the contract's breakdown dict)."""

from __future__ import annotations

from typing import Any

from skillrl_core.records import EpisodeRecord, TurnRecord

RESULTS_PAGE = (
    "Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B09QKP7XQL [SEP] "
    "Men's Slim Fit Long Sleeve Dress Shirt, Navy [SEP] $24.99 [SEP] B07HRFSNL4 [SEP] "
    "Casual Cotton Button Down Shirt for Men [SEP] $19.99 [SEP] B08XYZ1234 [SEP] "
    "Classic Oxford Shirt Regular Fit [SEP] $31.50"
)
PRODUCT_PAGE = (
    "Back to Search [SEP] < Prev [SEP] size [SEP] small [SEP] medium [SEP] large [SEP] x-large "
    "[SEP] color [SEP] navy [SEP] white [SEP] Men's Slim Fit Long Sleeve Dress Shirt, Navy "
    "[SEP] Price: $24.99 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews "
    "[SEP] Buy Now"
)


def _turns(actions: list[str], *, truncated: bool = False) -> list[TurnRecord]:
    pages = ["WebShop [SEP] Instruction: [SEP] ... [SEP] Search", RESULTS_PAGE]
    turns = []
    for index, action in enumerate(actions):
        observation = pages[index] if index < len(pages) else PRODUCT_PAGE
        last = index == len(actions) - 1
        turns.append(
            TurnRecord(
                turn=index,
                observation=observation,
                available_actions=["click[back to search]", "click[buy now]"],
                action=action,
                action_valid=True,
                reward=0.0,
                terminated=last and action == "click[buy now]",
                truncated=last and truncated,
            )
        )
    return turns


def breakdown(
    *,
    reward: float,
    chosen: dict[str, str],
    wanted: list[str],
    missed_options: list[str] = (),
    missed_attributes: list[str] = (),
    price_ok: bool = True,
    r_type: float = 1.0,
    category: str = "fashion",
) -> dict[str, Any]:
    matched = [w for w in wanted if w not in missed_options]
    return {
        "reward": reward,
        "r_type": r_type,
        "type": {"query_match": r_type == 1.0, "category_match": True, "title_score": 0.8},
        "attributes": {
            "matched": ["slim fit"],
            "missed": list(missed_attributes),
        },
        "options": {
            "matched": matched,
            "missed": list(missed_options),
            "chosen": chosen,
            "wanted": wanted,
        },
        "price": {"ok": price_ok, "upper_bound": 40.0, "paid": 24.99 if price_ok else 52.0},
        "goal": {
            "asin": "B09QKP7XQL",
            "instruction": "i need a slim fit long sleeve dress shirt in large, navy",
            "category": category,
            "attributes": ["slim fit", "long sleeve"],
            "options": wanted,
            "price_upper": 40.0,
        },
        "purchased": {
            "asin": "B09QKP7XQL",
            "title": "Men's Slim Fit Long Sleeve Dress Shirt, Navy",
            "category": category,
            "price": 24.99 if price_ok else 52.0,
            "options": chosen,
        },
    }


INSTRUCTION = (
    "i need a slim fit long sleeve dress shirt in large, navy, and price lower than 40.00 dollars"
)


def episode(
    *,
    success: bool,
    chosen: dict[str, str],
    missed_options: list[str] = (),
    missed_attributes: list[str] = (),
    price_ok: bool = True,
    r_type: float = 1.0,
    category: str = "fashion",
    split: str = "train",
    episode_id: str | None = None,
    goal_id: str = "train-17",
) -> EpisodeRecord:
    """A purchase episode: search, open a product, click the chosen options, buy."""
    actions = ["search[slim fit long sleeve dress shirt navy]", "click[b09qkp7xql]"]
    actions += [f"click[{value}]" for value in chosen.values()]
    actions.append("click[buy now]")
    score = 1.0 if success else 0.5
    record = EpisodeRecord(
        env_id="webshop",
        goal_id=goal_id,
        instruction=INSTRUCTION,
        category=category,
        turns=_turns(actions),
        success=success,
        score=score,
        reward_breakdown=breakdown(
            reward=score,
            chosen=chosen,
            wanted=["large", "navy"],
            missed_options=missed_options,
            missed_attributes=missed_attributes,
            price_ok=price_ok,
            r_type=r_type,
            category=category,
        ),
        split=split,
        agent="test",
    )
    if episode_id:
        record.episode_id = episode_id
    return record


def unfinished_episode(*, category: str = "fashion") -> EpisodeRecord:
    """An episode that paged through results until the turn limit."""
    actions = ["search[dress shirt]"] + ["click[next >]"] * 14
    return EpisodeRecord(
        env_id="webshop",
        goal_id="train-3",
        instruction=INSTRUCTION,
        category=category,
        turns=_turns(actions, truncated=True),
        success=False,
        score=0.0,
        split="train",
    )
