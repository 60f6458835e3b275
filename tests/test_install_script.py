"""``scripts/install.sh`` says what it installs, lets pip show progress and ends naming the next
command, run against a stand-in Python that records the pip calls instead of installing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "install.sh"

STAND_IN = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then
  case "$2" in
    *"import torch"*) exit "${HAS_TORCH:-1}" ;;
    *) echo /fake/env; exit 0 ;;
  esac
fi
echo "$*" >> "$PIP_CALLS"
"""


def install(tmp_path: Path, *args: str, **env: str) -> tuple[str, list[str]]:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    calls = tmp_path / "pip-calls"
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "PYTHON": str(python), "PIP_CALLS": str(calls), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, calls.read_text().splitlines()


@pytest.mark.parametrize("variant", ["product", "dev"])
def test_install_names_each_step_and_ends_with_the_next_command(tmp_path, variant):
    args = ("dev",) if variant == "dev" else ()
    out, calls = install(tmp_path, *args)
    lines = out.splitlines()
    assert lines[0].startswith("Installing skillrl into /fake/env")
    assert [line[:5] for line in lines[1:4]] == ["[1/3]", "[2/3]", "[3/3]"]
    assert "SmolLM2-135M-Instruct" in lines[2] and ("test tools" in lines[3]) == (variant == "dev")
    assert lines[-1].startswith("done in ") and "Next: skillrl run --env webshop" in lines[-1]
    assert [c.split()[:2] for c in calls] == [["-m", "pip"]] * 3
    assert not any(" -q " in f" {c} " for c in calls)  # pip shows its progress


def test_quiet_install_for_ci_and_a_kept_torch(tmp_path):
    out, calls = install(tmp_path, SKILLRL_INSTALL_QUIET="1", HAS_TORCH="0")
    assert "[1/3] torch: already installed, kept" in out
    assert len(calls) == 2 and all(" -q " in f" {c} " for c in calls)
