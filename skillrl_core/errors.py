"""The skillrl error tree: every error a user can cause derives from :class:`SkillRLError`.

Messages say what was wrong and what to do about it. Errors the *model* causes (an unparsable
action, malformed JSON from a teacher) are not raised: they are recorded on the step and the loop
goes on.
"""

from __future__ import annotations


class SkillRLError(Exception):
    """Root of every error skillrl raises on purpose."""


class ConfigError(SkillRLError, ValueError):
    """A configuration value is invalid (names the field and the value)."""


class UnknownEnvError(SkillRLError, KeyError):
    """An environment id is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DataFileError(SkillRLError):
    """A data file is missing, corrupt or does not match the expected schema."""


class ImportFormatError(DataFileError):
    """An import file has a malformed record; nothing was written."""


class DependencyNotInstalled(SkillRLError, ImportError):
    """An optional dependency is missing; the message has the install command."""


class SkillNotFoundError(SkillRLError, LookupError):
    """No bank entry (or revision, or snapshot) has the given id."""


class BankError(SkillRLError):
    """The skill bank could not complete an operation (nothing was changed)."""


class StaleRevisionError(BankError):
    """An edit was made from a revision the entry has since moved past (nothing was changed)."""

    def __init__(self, message: str, *, expected: int, current: int) -> None:
        super().__init__(message)
        self.expected = expected
        """The revision the edit was made from."""
        self.current = current
        """The entry's revision when the edit arrived."""


class BankInconsistentError(BankError):
    """SQL and the vector index disagree; run ``skillrl skills reindex``."""


class ModelLoadError(SkillRLError):
    """A policy or embedding model could not be found or loaded."""


class BackendError(SkillRLError):
    """A policy backend failed (server unreachable, retries exhausted, ...)."""


class DistillError(SkillRLError):
    """The distiller could not produce valid entries (for example, a teacher's retries ran out)."""


class CheckpointError(SkillRLError):
    """A checkpoint or training state is missing, corrupt or incompatible."""


class InvalidEntryError(SkillRLError, ValueError):
    """A skill-bank entry has a missing or invalid field (names the field); nothing was saved."""


class EnvStateError(SkillRLError, RuntimeError):
    """An environment was used out of order (for example, ``step()`` before ``reset()``)."""
