"""The view's change forms read strictly: what a form sent is saved as sent, or refused.

The pages' forms post ``application/x-www-form-urlencoded`` bodies. Starlette's form parser
turns a malformed percent-encoding into U+FFFD and a file part into an upload object, and the last
of two same-named fields wins; each of these would be saved as something nobody typed. So a body
is parsed here with the standard library's strict decoding, and every oddity is refused with a
4xx ``HTTPException`` naming it, before anything is looked up or written.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.requests import Request

FORM_TYPE = "application/x-www-form-urlencoded"
"""The only body type the view's forms send."""
MAX_BODY = 1 << 20
"""Largest form body read, in bytes (an entry's fields percent-encoded fit many times over)."""
MAX_FIELDS = 64
"""Most fields one form may send (the edit form sends six)."""
_REVISION = re.compile(r"[0-9]{1,100}")
"""A revision number as a form sends it: ASCII digits only (``int`` also takes ``١``, ``1_0``)."""


async def read_form(request: Request) -> dict[str, str]:
    """Return the fields of ``request``'s urlencoded body; refuse anything else with a 4xx."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != FORM_TYPE:
        sent = kind or "a body without a type"
        raise HTTPException(415, f"a change is sent as {FORM_TYPE} (the page's form), not {sent}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise HTTPException(413, f"the form is larger than {MAX_BODY} bytes; nothing saved")
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict", max_num_fields=MAX_FIELDS)
    except UnicodeDecodeError as error:  # raw or percent-encoded bytes that are not UTF-8
        bad = error.object[error.start : error.end]
        raise HTTPException(
            400, f"the form is not valid percent-encoded UTF-8 (bytes {bad!r}); nothing saved"
        ) from error
    except ValueError as error:  # parse_qsl's field limit
        raise HTTPException(
            400, f"the form sends more than {MAX_FIELDS} fields; nothing saved"
        ) from error
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise HTTPException(400, f"the form sends the field {name!r} twice; nothing saved")
        fields[name] = value
    return fields


def form_revision(fields: dict[str, str], name: str, meaning: str) -> int:
    """Return the revision number the form sends in ``name``; a 400 when absent or not one.

    ``meaning`` says in the refusal what the field is for.
    """
    text = fields.get(name)
    if text is None:
        raise HTTPException(400, f"the form sends no {name} ({meaning})")
    if not _REVISION.fullmatch(text):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise HTTPException(400, f"{name} ({shown!r}) must be a revision number: {meaning}")
    return int(text)
