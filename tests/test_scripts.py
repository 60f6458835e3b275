"""The scripts a newcomer and CI run, against stand-ins that record what they would run.

``scripts/install.sh`` says what it installs, lets pip show progress and ends naming the next
command; ``scripts/test.sh`` runs every test, or the fast tier.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
SCRIPT = SCRIPTS / "install.sh"

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


def run_test_sh(tmp_path: Path, *args: str) -> list[str]:
    """Run a copy of scripts/test.sh with install, services and python3 standing in."""
    scripts = tmp_path / "repo" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "test.sh").write_text((SCRIPTS / "test.sh").read_text())
    (scripts / "install.sh").write_text("exit 0\n")
    (scripts / "services.sh").write_text(
        "start_test_services() { :; }\nstop_test_services() { :; }\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$PYTEST_ARGS"\n')
    python.chmod(0o755)
    recorded = tmp_path / "pytest-args"
    done = subprocess.run(
        ["bash", str(scripts / "test.sh"), *args],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTEST_ARGS": str(recorded)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return recorded.read_text().splitlines()


@pytest.mark.parametrize(
    ("args", "pytest_args"),
    [
        ((), ["-m", "pytest"]),
        (("fast",), ["-m", "pytest", "-m", "not slow"]),
        (("fast", "tests/envs", "-x"), ["-m", "pytest", "-m", "not slow", "tests/envs", "-x"]),
        (("tests/envs",), ["-m", "pytest", "tests/envs"]),
    ],
)
def test_the_full_run_and_the_fast_tier_pass_pytest_what_the_readme_says(
    tmp_path, args, pytest_args
):
    assert run_test_sh(tmp_path, *args) == pytest_args
