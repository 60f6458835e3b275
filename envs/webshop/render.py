"""Turn page segments into the original's ``text`` and ``text_rich`` observations.

``text``: the visible texts joined by `` [SEP] `` (whitespace-only texts dropped).
``text_rich``: one text per line; buttons as ``[button] X [button_]``, option labels indented and
marked ``[clicked button]`` when chosen (plus a leading ``You have clicked X.`` line), product
links on their own line and marked clicked once visited in this search session.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.webshop.pages import Segment


def render_text(segments: Sequence[Segment]) -> str:
    """Render the ``text`` observation mode."""
    return " [SEP] ".join(s.text.strip() for s in segments if s.text.strip())


def render_text_rich(segments: Sequence[Segment]) -> str:
    """Render the ``text_rich`` observation mode."""
    observation = ""
    for segment in segments:
        text = segment.text.strip()
        if not text:
            continue
        if segment.kind == "button":
            line = f"[button] {text} [button_]"
        elif segment.kind == "option" and segment.clicked:
            line = f"  [clicked button] {text} [clicked button_]"
            observation = f"You have clicked {text}.\n" + observation
        elif segment.kind == "option":
            line = f"  [button] {text} [button_]"
        elif segment.kind == "product":
            mark = "clicked button" if segment.clicked else "button"
            line = f"\n[{mark}] {text} [{mark}_]"
        else:
            line = text
        observation += line + "\n"
    return observation


def render(segments: Sequence[Segment], mode: str) -> str:
    """Render in ``mode`` (``text`` or ``text_rich``)."""
    return render_text_rich(segments) if mode == "text_rich" else render_text(segments)
