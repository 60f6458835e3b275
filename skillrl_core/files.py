"""Atomic file writes: the one way every package writes a file a user keeps.

A reader (a resumed run, a concurrent ``skillrl skills list``, a user's editor) must see either
the old file or the new one, never half of one: the text goes to a temp file in the same folder,
is flushed to disk, and is renamed over the target. ``mkstemp`` makes the temp file private
(0600); the result gets the permissions a plain ``open`` would give (0666 minus the umask), so a
checkpoint, an export and a shipped starting bank all come out alike.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from skillrl_core.errors import DataFileError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_readable(path: Path, *, directory: bool = False) -> None:
    """Give a ``mkstemp``/``mkdtemp`` result the permissions a plain open or mkdir would."""
    path.chmod((0o777 if directory else 0o666) & ~_umask())


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, create_folder: bool = True
) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename.

    ``create_folder=False`` refuses a missing folder instead of creating it (for paths a user
    typed, where creating folders would hide a typo). Any OS error becomes a
    :class:`DataFileError` that names the path; the target is then unchanged and no temp file is
    left behind.
    """
    target = Path(path)
    try:
        if create_folder:
            target.parent.mkdir(parents=True, exist_ok=True)
        elif not target.parent.is_dir():
            raise DataFileError(f"cannot write {target}: the folder {target.parent} does not exist")
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise DataFileError(f"cannot write {target}: {e.strerror or e}") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        make_readable(Path(tmp))
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise DataFileError(f"cannot write {target}: {e.strerror or e}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(
    path: str | os.PathLike[str], data: Any, *, indent: int = 2, sort_keys: bool = True
) -> None:
    """Write ``data`` as JSON (UTF-8, non-ASCII kept), atomically."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n"
    atomic_write_text(path, text)


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON file whose top level must be an object; anything else is a DataFileError.

    A missing or unreadable file, bytes that are not UTF-8, malformed or too deeply nested JSON,
    and a top level that is not an object each raise one :class:`DataFileError` naming the
    file, so a damaged file a program wrote (a run's ``state.json``) never ends in a traceback.
    """
    target = Path(path)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except OSError as e:
        raise DataFileError(f"cannot read {target}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise DataFileError(f"{target} is not UTF-8 text (byte {e.start}: {e.reason})") from e
    except json.JSONDecodeError as e:
        raise DataFileError(
            f"{target} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from e
    except RecursionError as e:
        raise DataFileError(f"{target} is not valid JSON (nested too deeply)") from e
    if not isinstance(data, dict):
        raise DataFileError(f"{target} must hold a JSON object, not {type(data).__name__}")
    return data
