"""The ``skillrl`` command line: a thin click layer over the library.

Subcommands live in ``skillrl_cli/`` and are imported only when invoked, so
``skillrl --help`` answers instantly without importing torch.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings

import click

# Loggers of this project; every other logger is a library's.
OWN_LOGGERS = ("skillrl", "memory", "envs", "trainers", "cli", "__main__")


class _LibraryFilter(logging.Filter):
    """Let library records through only from ``level`` up (some, like bm25s, log at DEBUG)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".", 1)[0] in OWN_LOGGERS or record.levelno >= self.level


def configure_logging(verbose: int, stream: object = None) -> logging.Handler:
    """Log to stderr: warnings only; -v adds skillrl's info, -vv debug from everything.

    Libraries' own levels are not trusted (bm25s sets its logger to DEBUG on import), so the
    handler filters library records itself.
    """
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    handler = logging.StreamHandler(stream)  # type: ignore[arg-type]
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_LibraryFilter(logging.DEBUG if verbose >= 2 else logging.WARNING))
    handler.set_name("skillrl-cli")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "skillrl-cli"]:
        root.removeHandler(old)  # main() runs more than once in one process under tests
    root.addHandler(handler)
    root.setLevel(level)
    return handler


LIBRARY_MODULES = (
    r"(transformers|torch|peft|trl|accelerate|datasets|huggingface_hub|sentence_transformers"
    r"|chromadb|gguf)(\.|$)"
)
"""Libraries whose warnings a run hides below ``-vv`` (a regex over the warning's module)."""


def quiet_libraries(verbose: int) -> None:
    """Below ``-vv``, hide the libraries' warnings and progress bars.

    A first run otherwise shows transformers' FutureWarnings, torch's ``pin_memory`` warning
    and the "Loading weights" and dataset bars between skillrl's own lines. The bars are off
    through the switches the Hugging Face libraries read at import (environment variables, so
    that nothing is imported here); skillrl's own progress is unaffected.
    """
    if verbose >= 2:
        return
    warnings.filterwarnings("ignore", module=LIBRARY_MODULES)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars read it too
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


# name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "envs": "skillrl_cli.envs:envs",
    "run": "skillrl_cli.run:run",
    "skills": "skillrl_cli.skills:skills",
    "distill": "skillrl_cli.distill:distill",
    "bootstrap": "skillrl_cli.bootstrap:bootstrap",
    "train": "skillrl_cli.train:train",
    "sft": "skillrl_cli.sft:sft",
    "eval": "skillrl_cli.eval:eval_command",
    "runs": "skillrl_cli.runs:runs",
    "view": "skillrl_cli.view.command:view",
}

HELP: dict[str, str] = {
    "envs": "List the available environments.",
    "run": "Play episodes (a model, the scripted expert, or you) and show every turn.",
    "skills": "Inspect and edit the skill bank.",
    "distill": "Distill stored trajectories into skills and counterfactual notes.",
    "bootstrap": "Seed a skill bank from expert (or teacher) episodes.",
    "train": "Run recursive improvement cycles (roll out, distill, GRPO, evaluate, evolve).",
    "sft": "Cold start: fine-tune the policy on expert turns (behaviour cloning + DAgger).",
    "eval": "Evaluate a checkpoint and bank: success, score, Pass@(K,T), timings.",
    "runs": "List training runs (train and sft): progress, best success, checkpoints.",
    "view": "Open a local web view of episodes, the skill bank and training runs.",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return every subcommand name, without importing any."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return one subcommand."""
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def invoke(self, ctx: click.Context) -> object:
        """Run the chosen subcommand."""
        # Errors users can cause become one clear line and exit code 1, not a traceback.
        from skillrl_core.errors import SkillRLError

        try:
            return super().invoke(ctx)
        except SkillRLError as error:
            # The problem in words: the class name only when the message is empty.
            raise click.ClickException(str(error) or type(error).__name__) from error

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List subcommands with their one-line help."""
        # Listing help must not import every subcommand (and torch with them).
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="More log output: -v skillrl's info, -vv debug (libraries' too).",
)
@click.version_option(package_name="skillrl")
def main(verbose: int) -> None:
    """skillrl: LLM agents that get better through a per-turn skill bank and turn-level GRPO.

    The workspace (skill bank, training runs and their checkpoints) defaults to ./.skillrl; set
    SKILLRL_WORKSPACE or each command's --workspace to move it. Converted models are cached per
    user, shared by every workspace: $SKILLRL_CACHE, else ~/.cache/skillrl.
    """
    configure_logging(verbose)
    quiet_libraries(verbose)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


if __name__ == "__main__":
    main()
