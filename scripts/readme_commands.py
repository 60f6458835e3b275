"""Run every ``skillrl`` command line of the README, as written, from an empty folder.

    python scripts/readme_commands.py                 # every line, 60 s each at most
    python scripts/readme_commands.py --box 120 --only "skills "

``tests/test_readme_commands.py`` parses each command with the CLI's own parser; this script
runs them, in README order, in one fresh folder (so ``skills show`` finds the bank that ``run``
seeded). A line passes when it exits 0, or when it is still working at the end of its time box
(``--box`` seconds: a training run or a web server is cut there with Ctrl-C); it fails when it
exits otherwise or prints a traceback. The script exits 1 when any line failed.

Some lines cannot run here, and are reported as skipped with the reason: those that need a
server they name (a model server's ``--base-url``, PostgreSQL and Chroma, a GPU's ``trl
vllm-serve``), WebShop's original data files (unless ``--webshop-data`` names them), or a
folder that an earlier line makes only when it runs to its end. The example entry id
``3f2a9c`` is replaced by the id of an entry of the bank.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_ENTRY_ID = "3f2a9c"
LINE_NEEDS = {
    "--base-url": "a model server at the URL it names",
    "--teacher-base-url": "a model server at the URL it names",
}
"""Words that make a line need a server."""
BLOCK_NEEDS = {
    "trl vllm-serve": "a GPU and the `trl vllm-serve` server its block starts",
    "SKILLRL_DATABASE_URL=postgresql": "the PostgreSQL and Chroma servers its block names",
}
"""Words that make every line of their block need a server."""


@dataclass(frozen=True)
class Outcome:
    """What one README line did."""

    line: str
    verdict: str
    """``passed``, ``cut`` (still working when its box ended, and Ctrl-C stopped it: a pass),
    ``skipped`` or ``failed``."""
    seconds: float = 0.0
    why: str = ""


def readme_blocks(readme: Path) -> list[list[str]]:
    """Return the README's bash blocks, each as its lines with continuation lines joined."""
    blocks = []
    for block in readme.read_text(encoding="utf-8").split("```bash\n")[1:]:
        joined: list[str] = []
        for line in block.split("```")[0].splitlines():
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
            elif line.strip():
                joined.append(line.strip())
        blocks.append(joined)
    return blocks


def without_comment(line: str) -> str:
    """Return the line without its trailing ``# ...`` comment (a ``#`` inside quotes is kept)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line


def skip_reason(block: list[str], line: str, webshop_data: str | None) -> str | None:
    """Say why a line cannot run here, or None."""
    for needle, reason in BLOCK_NEEDS.items():
        if any(needle in other for other in block):
            return f"needs {reason}"
    if line.startswith(("bash scripts/", "pip ")):
        return "installs or tests: CI and the fresh-venv check run it"
    if not re.search(r"(^|&& )(skillrl|torchrun) ", line):
        return "not a skillrl command"
    for needle, reason in LINE_NEEDS.items():
        if needle in line:
            return f"needs {reason}"
    if "~/webshop/data" in line and webshop_data is None:
        return "needs WebShop's original data files (--webshop-data names them)"
    for word in shlex.split(line, comments=True):
        path = word.split("=", 1)[-1]
        if path.startswith(".skillrl/") and not Path(path).exists():
            return f"needs {path}, which an earlier line makes only when it runs to its end"
    return None


def entry_id() -> str | None:
    """Return the id of the first entry of the folder's bank, or None."""
    listed = subprocess.run(
        ["skillrl", "skills", "list", "--json"], capture_output=True, text=True, check=False
    )
    try:
        entries = json.loads(listed.stdout)
    except json.JSONDecodeError:
        return None
    entries = entries.get("entries", entries) if isinstance(entries, dict) else entries
    return str(entries[0]["id"]) if entries else None


def run_line(line: str, box: float) -> Outcome:
    """Run one line in bash, in its own process group; Ctrl-C it when its box ends."""
    started = time.monotonic()
    process = subprocess.Popen(
        ["bash", "-c", line],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # A script started in the background (`nohup ... &`) has Ctrl-C ignored, and so would
        # every line it runs: give each line the default, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    before = ""  # what a cut line printed before its Ctrl-C
    try:
        output, _ = process.communicate(timeout=box)
        cut = False
    except subprocess.TimeoutExpired as timeout:
        partial = timeout.output or b""
        before = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        os.killpg(process.pid, signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
            stopped = True
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            stopped = False
        cut = True
    seconds = time.monotonic() - started
    # torchrun answers Ctrl-C with its own traceback (SignalException); skillrl's commands
    # never print one, interrupted or not.
    checked = before if cut and line.startswith("torchrun ") else output  # output: all of it
    if "Traceback (most recent call last)" in checked:
        return Outcome(line, "failed", seconds, "printed a traceback: " + checked[-400:])
    if cut and not stopped:
        return Outcome(line, "failed", seconds, "Ctrl-C did not stop it within 60 s")
    if cut:
        return Outcome(line, "cut", seconds, f"still working after {box:.0f} s")
    if process.returncode != 0:
        return Outcome(line, "failed", seconds, f"exit {process.returncode}: {output[-400:]}")
    return Outcome(line, "passed", seconds)


def main() -> int:
    """Run the README's lines; 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--box", type=float, default=60.0, help="seconds a line may run")
    parser.add_argument("--only", default=None, help="run only lines holding this text")
    parser.add_argument("--folder", type=Path, default=None, help="default: a fresh temp folder")
    parser.add_argument("--webshop-data", default=None, help="WebShop's original data folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes here")
    args = parser.parse_args()
    blocks = readme_blocks(args.readme)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="readme-commands-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.chdir(folder)
    os.environ.pop("SKILLRL_WORKSPACE", None)
    outcomes = []
    for block in blocks:
        for raw in block:
            line = without_comment(raw)
            if not line or line.startswith(("export ", "chroma ")):
                continue
            if args.only and args.only not in line:
                continue
            reason = skip_reason(block, line, args.webshop_data)
            if reason is None and EXAMPLE_ENTRY_ID in line:
                found = entry_id()
                if found is None:
                    reason = "needs an entry in the bank (no earlier line made one)"
                else:
                    line = line.replace(EXAMPLE_ENTRY_ID, found[:8])
            if reason is None and args.webshop_data:
                line = line.replace("~/webshop/data", shlex.quote(args.webshop_data))
            outcome = Outcome(line, "skipped", why=reason) if reason else run_line(line, args.box)
            outcomes.append(outcome)
            print(f"{outcome.verdict:8} {outcome.seconds:6.1f} s  {line}", flush=True)
            if outcome.why and outcome.verdict != "passed":
                print(f"{'':17}{outcome.why.splitlines()[-1]}", flush=True)
    failed = [o for o in outcomes if o.verdict == "failed"]
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("passed", "cut", "skipped")}
    print(
        f"\n{len(outcomes)} lines: {counts['passed']} passed, {counts['cut']} still working when "
        f"their box ended, {counts['skipped']} skipped, {len(failed)} failed (folder {folder})"
    )
    for outcome in failed:
        print(f"\nFAILED: {outcome.line}\n{outcome.why}")
    if args.json:
        args.json.write_text(
            json.dumps([vars(o) for o in outcomes], indent=2) + "\n", encoding="utf-8"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
