"""Parse and validate a teacher model's JSON reply into entry drafts.

The schema is small and its error messages are fed back to the teacher verbatim on a retry, so it
is checked by hand here (a generic JSON-Schema validator would give messages about JSON pointers
that a small model cannot act on, and ``jsonschema`` is not a declared dependency).

Expected shape::

    {"entries": [
        {"kind": "task" | "general" | "mistake",
         "title": str, "principle": str, "when_to_apply": str,
         # mistake only, all three required:
         "failure_point": str, "flawed_action": str, "correction": str}
    ]}
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory.types import SKILL_KINDS, EntryDraft
from skillrl_core.text import hidden_character

MAX_TITLE_CHARS = 100
MAX_FIELD_CHARS = 600
MAX_ENTRIES = 6

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_MISTAKE_FIELDS = ("failure_point", "flawed_action", "correction")


def _entries_schema() -> dict[str, Any]:
    text = {"type": "string", "maxLength": MAX_FIELD_CHARS}
    entry = {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": list(SKILL_KINDS)},
            "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
            "principle": text,
            "when_to_apply": text,
            **{name: text for name in _MISTAKE_FIELDS},
        },
        "required": ["kind", "title", "principle"],
    }
    return {
        "type": "object",
        "properties": {"entries": {"type": "array", "items": entry, "maxItems": MAX_ENTRIES}},
        "required": ["entries"],
    }


ENTRIES_SCHEMA: dict[str, Any] = _entries_schema()
"""The reply shape above as JSON Schema, for servers that constrain decoding to a schema
(``response_format``). :func:`parse_entries` still checks every reply: the schema cannot say
that a mistake needs all three of its extra fields, and not every server enforces it."""


class SchemaViolation(ValueError):
    """The reply is not valid JSON of the expected shape (message says what to fix)."""


def extract_json(text: str) -> Any:
    """Return the JSON value in ``text``: a fenced block, else the outermost ``{...}``."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1:
        # Without a closing brace, parse the rest anyway so the error says where it broke.
        candidates.append(text[start : end + 1] if end > start else text[start:])
    if not candidates:
        raise SchemaViolation("no JSON object found; reply with one JSON object only")
    last_error = ""
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as error:
            last_error = f"invalid JSON: {error.msg} at line {error.lineno} column {error.colno}"
    raise SchemaViolation(last_error)


def _text_field(record: dict[str, Any], name: str, where: str, *, required: bool) -> str:
    value = record.get(name, "")
    if not isinstance(value, str):
        raise SchemaViolation(f"{where}.{name} must be a string, got {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise SchemaViolation(f"{where}.{name} is required and must not be empty")
    limit = MAX_TITLE_CHARS if name == "title" else MAX_FIELD_CHARS
    if len(value) > limit:
        raise SchemaViolation(f"{where}.{name} is {len(value)} characters; keep it under {limit}")
    hidden = hidden_character(value)
    if hidden is not None:  # the bank refuses it: entries hold plain text only
        raise SchemaViolation(f"{where}.{name} contains {hidden}; write plain text only")
    return value


def _entry(record: Any, where: str, env: str | None, category: str | None) -> EntryDraft:
    if not isinstance(record, dict):
        raise SchemaViolation(f"{where} must be an object")
    kind = record.get("kind")
    if kind not in SKILL_KINDS:
        raise SchemaViolation(f"{where}.kind must be one of {list(SKILL_KINDS)}, got {kind!r}")
    is_mistake = kind == "mistake"
    fields = {
        name: _text_field(record, name, where, required=name in ("title", "principle"))
        for name in ("title", "principle", "when_to_apply")
    }
    for name in _MISTAKE_FIELDS:
        fields[name] = _text_field(record, name, where, required=is_mistake)
    general = kind == "general"
    return EntryDraft(
        kind=kind,
        env=None if general else env,
        category=None if general else category,
        source="distiller:teacher",
        **fields,
    )


def parse_entries(text: str, *, env: str | None, category: str | None) -> list[EntryDraft]:
    """Parse a teacher reply into drafts for ``env``/``category``; raise SchemaViolation."""
    data = extract_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise SchemaViolation('the reply must be an object with an "entries" list')
    records = data["entries"]
    if len(records) > MAX_ENTRIES:
        raise SchemaViolation(f"{len(records)} entries; give at most {MAX_ENTRIES}")
    return [_entry(r, f"entries[{i}]", env, category) for i, r in enumerate(records)]
