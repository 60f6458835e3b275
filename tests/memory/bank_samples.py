"""Sample entries shared by the skill-bank tests."""

from __future__ import annotations

from memory import EntryDraft

SIZE_NOTE = EntryDraft(
    kind="task",
    title="Pick the shoe size the customer asked for",
    principle="Before buying footwear, click the size option that matches the size in the "
    "instruction (e.g. size 9); a wrong size fails the purchase.",
    when_to_apply="On a footwear product page with size options.",
    env="webshop",
    category="footwear",
)
PRICE_NOTE = EntryDraft(
    kind="task",
    title="Stay under the price limit",
    principle="Compare each item's price with the budget in the instruction and skip items "
    "that cost more than the stated maximum.",
    when_to_apply="On search results and product pages.",
    env="webshop",
    category="footwear",
)
GENERAL = EntryDraft(
    kind="general",
    title="Re-read the instruction before buying",
    principle="Before clicking buy now, check every attribute and option the instruction asks "
    "for against the product page.",
)
MISTAKE = EntryDraft(
    kind="mistake",
    title="Bought without choosing a colour",
    principle="Select every required option (colour, size) before clicking buy now.",
    failure_point="The product page with colour options.",
    flawed_action="click[buy now]",
    correction="click[black], then click[buy now]",
    env="webshop",
    category="footwear",
)
