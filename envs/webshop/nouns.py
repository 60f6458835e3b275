"""Title nouns for WebShop's type reward, without spaCy.

The original (``engine/goal.py:get_type_reward``) runs spaCy's ``en_core_web_sm`` over the two
product titles and keeps tokens tagged ``NOUN`` or ``PROPN``. Downloading that model at run time
is not allowed here, and no PyPI package ships an English tagger we can load offline, so this
module approximates the tagger with rules tuned to product titles:

- tokens are split the way spaCy splits titles: on whitespace, around punctuation, and at
  hyphens between letters (``clip-in`` -> ``clip``, ``in``);
- numbers, tokens with digits (``3oz``), punctuation and closed-class words (determiners,
  prepositions, conjunctions, pronouns, auxiliaries, number words) are never nouns;
- a capitalised token counts as a noun: spaCy tags nearly every Title-Case word of an Amazon
  title ``PROPN`` (``Bright Citrus Deodorant by Earth Mama``: all ``PROPN`` but ``by``);
- a lowercase token counts unless it is a common product adjective/participle (a word list) or
  ends in an adjective suffix (``-ful``, ``-ous``, ``-ive``, ``-able``, ``-ible``, ``-less``,
  ``-ish``, ``-proof``, ``-free``).

It departs from spaCy mostly on lowercase adjectives missing from the list and on capitalised
adjectives that spaCy tags ``ADJ`` in context. Type reward is affected only when such a word
decides whether the overlap is 0, under 0.1, or over 0.2.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d+(?:[.,]\d+)*[A-Za-z]*|[^\sA-Za-z\d]")
CLOSED_CLASS = frozenset(
    """a an the this that these those some any each every no all both either neither
    and or but nor so yet plus
    of in on at by for with without to from into onto over under up down out off about above
    below between through per via near inside outside within along across against around
    i me my we us our you your he him his she her it its they them their
    is are was were be been being am has have had do does did can could will would should may
    might must shall
    one two three four five six seven eight nine ten twelve dozen""".split()
)
ADJECTIVES = frozenset(
    """new natural organic long short large small medium big little mini extra soft hard light
    dark heavy high low slim wide narrow thick thin fine full half double single triple premium
    best better good great perfect pure fresh sweet hot cold warm cool dry wet clean easy quick
    fast slow quiet loud safe strong durable portable adjustable comfortable breathable
    waterproof lightweight stretchy elastic casual formal classic modern vintage elegant cute
    sexy pretty beautiful luxury stylish simple basic sturdy solid round square flat deep
    tall tiny huge red blue green black white pink purple yellow orange brown grey gray beige
    navy gold golden silver ivory khaki multi multicolor assorted matte glossy shiny clear
    transparent wireless rechargeable electric digital smart compatible anti non gluten sugar
    vegan sensitive oily daily nightly weekly real faux genuine original official universal
    professional unscented scented hypoallergenic nourishing moisturizing hydrating long-lasting
    relaxed loose tight fitted cropped ribbed quilted padded knitted woven printed floral
    striped plaid solid-color dyed washable removable foldable stackable upholstered tufted
    wooden metal plastic leather cotton silk wool linen velvet suede denim bamboo glass steel
    ceramic rustic industrial mid century contemporary farmhouse outdoor indoor""".split()
)
_ADJ_SUFFIXES = ("ful", "ous", "ive", "able", "ible", "less", "ish", "proof", "free")


def tokenize(title: str) -> list[str]:
    """Split a title into spaCy-like tokens (hyphens between letters split the word)."""
    return _TOKEN.findall(title)


def is_noun(token: str) -> bool:
    """Whether the approximate tagger calls ``token`` a NOUN or PROPN."""
    if not token[0].isalpha() or any(ch.isdigit() for ch in token):
        return False
    lower = token.lower()
    if lower in CLOSED_CLASS or len(lower) == 1:
        return False
    if token[0].isupper():
        return True
    return lower not in ADJECTIVES and not lower.endswith(_ADJ_SUFFIXES)


def title_nouns(title: str) -> list[str]:
    """Lowercased noun tokens of a title, in order (repeats kept, as the original keeps them)."""
    return [t.lower() for t in tokenize(title) if is_noun(t)]
