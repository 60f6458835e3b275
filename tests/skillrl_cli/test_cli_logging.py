"""The CLI's logging: quiet libraries (bm25s logs at DEBUG on its own) unless -vv."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import warnings

import pytest

from cli import configure_logging, quiet_libraries


@pytest.fixture
def restore_root():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.mark.parametrize(
    ("verbose", "shown", "hidden"),
    [
        (0, ["WARNING bm25s: w", "WARNING skillrl.x: w"], ["bm25s: d", "skillrl.x: i"]),
        (1, ["skillrl.x: i", "WARNING bm25s: w"], ["bm25s: d", "bm25s: i", "skillrl.x: d"]),
        (2, ["bm25s: d", "skillrl.x: d", "memory.y: d"], []),
    ],
)
def test_library_records_stay_quiet_unless_very_verbose(restore_root, verbose, shown, hidden):
    stream = io.StringIO()
    configure_logging(verbose, stream)
    library = logging.getLogger("bm25s")
    library.setLevel(logging.DEBUG)  # what bm25s does on import
    ours = logging.getLogger("skillrl.x")
    library.debug("d"), library.info("i"), library.warning("w")
    ours.debug("d"), ours.info("i"), ours.warning("w")
    logging.getLogger("memory.y").debug("d")
    out = stream.getvalue()
    assert all(s in out for s in shown), out
    assert not any(s in out for s in hidden), out


def test_configuring_twice_keeps_one_handler(restore_root):
    configure_logging(0, io.StringIO())
    configure_logging(1, io.StringIO())
    names = [h.get_name() for h in logging.getLogger().handlers]
    assert names.count("skillrl-cli") == 1


@pytest.mark.slow
def test_a_run_prints_no_library_debug_lines(tmp_path):
    env = {**os.environ, "SKILLRL_WORKSPACE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "run",
            "--policy",
            "expert",
            "--no-record",
            "--max-turns",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "DEBUG" not in done.stderr and "bm25s" not in done.stderr


@pytest.mark.parametrize(("verbose", "library_shown"), [(0, False), (1, False), (2, True)])
def test_library_warnings_stay_hidden_unless_very_verbose(monkeypatch, verbose, library_shown):
    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_libraries(verbose)
        for module in (
            "transformers.modeling_utils",
            "torch.utils.data.dataloader",
            "trainers.cold_start.sft",
        ):
            warnings.warn_explicit("noise", FutureWarning, "x.py", 1, module=module)
    shown = [w.filename for w in seen]
    assert len(shown) == (3 if library_shown else 1)  # skillrl's own warning always shows
    assert (os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1") != library_shown
