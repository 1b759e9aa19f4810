"""The project's one error family.

Every error says what was expected, what was found, and what to do, because the people reading them
are auditors and operators who cannot read our source. Each class carries the process exit code the
CLI uses for it, so the exit-code contract lives next to the errors and nowhere else.
"""

from __future__ import annotations


class LineageError(Exception):
    """Base of every error rollout-lineage raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidFact(LineageError):
    """A fact failed validation: a field is missing, of the wrong type, or outside the
    vocabulary."""


class ClaimRefused(InvalidFact):
    """A fact that asserts a verification rollout-lineage performs itself, sent by someone else."""


class InvariantViolated(LineageError):
    """A fact is well formed but contradicts what the log already holds (nothing was recorded)."""


class ConflictingFact(InvariantViolated):
    """The same key already holds a different value; shows both."""


class UnknownSubject(InvariantViolated):
    """A fact refers to a run, node, fork or snapshot the log has never seen."""


class StageNotRecorded(InvariantViolated):
    """A stage was asked for that the run never marked."""


class SnapshotNotRestorable(InvariantViolated):
    """A snapshot was discarded without being exported or imported, so no world can be restored from
    it."""


class CustodyBroken(InvariantViolated):
    """Held artifact entries were not released with the same digests and no failure explains it."""


class InvalidInput(LineageError):
    """A file, line or argument from outside could not be read as what it claims to be."""


class NoStoreHere(InvalidInput):
    """A read command found no store where it looked (it never creates one)."""


class MalformedJSON(InvalidInput):
    """A file that is not JSON read one way: not UTF-8, a syntax error (a byte-order mark, a cut-off
    end), a key given twice, nesting too deep. `reason` says what is wrong, without the file."""

    def __init__(self, message: str, *, hint: str | None = None, reason: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason or message


class CorruptRunFile(InvalidInput):
    """A run file the harness writes once, when the run is over (benchflow's and Harbor's
    result.json), that exists but cannot be read as one JSON object. Waiting will not make it
    readable, so it is never taken for a run still being written: the import refuses the run and an
    audit calls it unhealthy. `file` and `reason` say which file and what is wrong with it."""

    def __init__(
        self, message: str, *, hint: str | None = None, file: str = "", reason: str = ""
    ) -> None:
        super().__init__(message, hint=hint)
        self.file = file
        self.reason = reason or message


class StoreUnavailable(LineageError):
    """The event store, projection database or Docker engine could not be reached or locked."""

    exit_code = 4


class StoreClosed(LineageError):
    """The application was closed and then asked to record: its connections are gone, and no retry
    brings them back."""


class ReadLimitExceeded(LineageError):
    """A read needed more than it may take: the read models' memory cap or the statement timeout."""

    exit_code = 4


class IntegrityFailure(LineageError):
    """Evidence does not match: a tampered log, a snapshot tar whose digests differ, a head that
    moved."""

    exit_code = 3


class SnapshotDigestMismatch(IntegrityFailure):
    """A snapshot tar's content does not match what was recorded or what it declares."""
