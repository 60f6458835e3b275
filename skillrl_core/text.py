"""Characters that must not hide in stored text, and how to show any text literally.

Entry text reaches prompts verbatim and terminals through ``skillrl skills``; a control
character in it could rewrite what a person sees (an ANSI colour, a cleared screen, an OSC 8
link, a carriage return over a line) or hide instructions from the person while the model reads
them. So text a person or a model writes into the bank is refused when it holds one
(:func:`hidden_character`), and text shown to a person has them made visible
(:func:`visible`), whichever bank, page or model it came from.
"""

from __future__ import annotations

import unicodedata

KEPT_CONTROLS = frozenset("\n\t")
"""Control characters ordinary text keeps (and terminals show harmlessly)."""
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional overrides and isolates: they reorder what a reader sees ("Trojan Source")."""


def _hidden(character: str) -> bool:
    if character in KEPT_CONTROLS:
        return False
    # Cc: C0/C1 controls and DEL (ESC starts ANSI and OSC sequences); Cs: a lone surrogate,
    # which no UTF-8 file, database or terminal can hold.
    return unicodedata.category(character) in ("Cc", "Cs") or character in BIDI_CONTROLS


def hidden_character(text: str) -> str | None:
    r"""Describe the first character of ``text`` that would act instead of show (None: none).

    The description names the code point, what it is and where: ``U+001B (\x1b, a control
    character) at position 4``.
    """
    for position, character in enumerate(text):
        if not _hidden(character):
            continue
        if unicodedata.category(character) == "Cs":
            kind = "a lone surrogate: the text was not valid UTF-8"
        elif character in BIDI_CONTROLS:
            kind = f"{unicodedata.name(character)}, a bidirectional control"
        else:
            kind = f"{_visible_character(character)}, a control character"
        return f"U+{ord(character):04X} ({kind}) at position {position}"
    return None


def _visible_character(character: str) -> str:
    code = ord(character)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def visible(text: str) -> str:
    r"""Return ``text`` with every control, lone surrogate and bidi control spelled out.

    ESC becomes the four characters ``\x1b``; newlines and tabs stay. A backslash is left
    alone, so ``visible`` is for people, not a reversible encoding.
    """
    if not any(_hidden(c) for c in text):
        return text
    return "".join(_visible_character(c) if _hidden(c) else c for c in text)
