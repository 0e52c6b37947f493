"""The error tree: every error a client may see has a stable code and a safe message."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

__all__ = [
    "INTERNAL_ERROR_CODE",
    "INTERNAL_ERROR_MESSAGE",
    "BinaryFileError",
    "BusyError",
    "ChangesWouldBeLostError",
    "ConfigError",
    "ConsentReplayedError",
    "ConsentStateRefusedError",
    "ConsentUnavailableError",
    "ExecutionError",
    "FieldProblem",
    "FileTooLargeError",
    "FolderUnlistedError",
    "ForbiddenError",
    "GitConfigUnreadableError",
    "GitIdentityMissingError",
    "GitLayoutRefusedError",
    "InstallRefusedError",
    "InvalidArgumentsError",
    "LineRangeError",
    "LinkedFileError",
    "NotFoundError",
    "OctError",
    "OutputLimitError",
    "PathRefusedError",
    "PinFileError",
    "PolicyError",
    "ProjectCodeRefusedError",
    "RateLimitUnavailableError",
    "RateLimitedError",
    "RefusedError",
    "SafeModeError",
    "SandboxUnavailableError",
    "SecretUnmaskedError",
    "TargetChangedError",
    "ToolChangedError",
    "ToolTimeoutError",
    "ToolUnavailableError",
    "UncheckedFolderError",
    "UnknownToolError",
    "WorkspaceError",
]


INTERNAL_ERROR_CODE: Final = "internal_error"
"""The code of a failure that is no OctError: a bug. The client and the audit log get this code and
INTERNAL_ERROR_MESSAGE, never the exception's text; the diagnostics log has the traceback."""
INTERNAL_ERROR_MESSAGE: Final = (
    "internal error: the server could not complete this call; its log has the details"
)


class OctError(Exception):
    """Base of every error oct-mcp raises on purpose.

    `message` is safe to show a client: it never carries argument values,
    secrets or host paths. `code` is stable and machine-readable.
    """

    code: ClassVar[str] = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RefusedError(OctError):
    """A layer refused the call; nothing inside that layer ran."""

    code = "refused"


class BusyError(RefusedError):
    """In-process work that ran past its time limit is still finishing: new in-process calls wait."""

    code = "busy"


class UnknownToolError(RefusedError):
    code = "unknown_tool"


class SafeModeError(RefusedError):
    code = "safe_mode"


class RateLimitedError(RefusedError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class RateLimitUnavailableError(RefusedError):
    """The shared store that holds the rate limit cannot be reached: no call goes through unlimited."""

    code = "rate_limit_unavailable"


class WorkspaceError(RefusedError):
    """The project root the server is bound to cannot be used."""

    code = "workspace"


class PolicyError(RefusedError):
    code = "policy"


class SandboxUnavailableError(RefusedError):
    """The profile needs an isolation the sandbox backend on this machine cannot give."""

    code = "sandbox_unavailable"


class ConsentUnavailableError(RefusedError):
    """The profile needs a human's answer and the client has no way to ask one."""

    code = "consent_unavailable"


class DryRunUnsupportedError(RefusedError):
    """The gate decided a dry run for an embedding host's tool, which has no way to make one."""

    code = "dry_run_unsupported"


class InstallRefusedError(RefusedError):
    """A tool's program leads to files outside the project that the sandbox must not show."""

    code = "install_refused"


class ProjectCodeRefusedError(RefusedError):
    """A read tool would run a program that lies inside the project, which is project code."""

    code = "project_code_refused"


class GitLayoutRefusedError(RefusedError):
    """The project's `.git` names git folders that are no real worktree or submodule of it."""

    code = "git_layout_refused"


class LinkedFileError(RefusedError):
    """A file a write may change in place has another name (a hard link), or its place is a link or
    no regular file: the write would reach what that other name is too (a hook, a file outside)."""

    code = "linked_file"


class ConsentReplayedError(RefusedError):
    """A human's answer came back with a sealed consent state that was already used once."""

    code = "consent_replayed"


class ConsentStateRefusedError(RefusedError):
    """A consent round came back with a sealed state that did not verify: forged, tampered, expired,
    or bound to other arguments. The SDK refuses it before the chain runs; the audit records it."""

    code = "consent_state_refused"


class TargetChangedError(RefusedError):
    """A file the human's consent was given for changed on disk after the preview they were shown."""

    code = "target_changed"


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One bad argument: where it is and what is wrong with it (never its value)."""

    field: str
    problem: str


class InvalidArgumentsError(RefusedError):
    code = "invalid_arguments"

    def __init__(self, tool: str, problems: Sequence[FieldProblem]) -> None:
        self.problems = tuple(problems)
        listed = "; ".join(f"{p.field}: {p.problem}" for p in self.problems)
        super().__init__(f"invalid arguments for {tool}: {listed}")


class FolderUnlistedError(RefusedError):
    """Before a writable run, a folder of the project the check of protected paths cannot list."""

    code = "folder_unlisted"


class PathRefusedError(RefusedError):
    """A path argument would leave the project root or could be read as an option."""

    code = "path_refused"


class ExecutionError(OctError):
    """The tool ran and failed."""

    code = "execution_failed"


class ProtectedPathCreatedError(ExecutionError):
    """A writable run created a protected path that did not exist before it (removed again where safe)."""

    code = "protected_path_created"


class UncheckedFolderError(ExecutionError):
    """After a writable run, a folder the check of protected paths cannot list: what it holds is unknown."""

    code = "unchecked_folder"


class ToolTimeoutError(ExecutionError):
    code = "timeout"


class OutputLimitError(ExecutionError):
    code = "output_limit"


class ToolUnavailableError(ExecutionError):
    """The program a tool runs is missing or cannot be started."""

    code = "tool_unavailable"


class NotFoundError(ExecutionError):
    code = "not_found"


class BinaryFileError(ExecutionError):
    code = "binary_file"


class FileTooLargeError(ExecutionError):
    code = "file_too_large"


class GitConfigUnreadableError(ExecutionError):
    """git could not list its own config, so its filter drivers cannot all be switched off."""

    code = "git_config_unreadable"


class ForbiddenError(RefusedError):
    """The caller's identity is not granted the tool (its token's scopes); nothing ran, nobody was asked."""

    code = "forbidden"


class ToolChangedError(RefusedError):
    """A tool's definition differs from the one pinned when it was first served; withheld until
    the operator accepts it with `oct-mcp tools accept NAME`."""

    code = "tool_changed"


class PinFileError(RefusedError):
    """The pin file of tool definitions is unreadable, corrupt or tampered; every tool is withheld."""

    code = "pin_file"


class RuleExamplesError(RefusedError):
    """A rule example over an embedding host's own tools disagrees with its rule, found when the host
    listed them; every tool is withheld until the rule or the example is fixed."""

    code = "rule_examples"


class ConfigError(OctError):
    """Bad configuration or profile, found at start-up.

    `rule` names the check that refused (`terminal_not_last`, `unknown_layer`, ...): stable, where
    the message is written for people.
    """

    code = "config"

    def __init__(self, message: str, *, rule: str = "config") -> None:
        super().__init__(message)
        self.rule = rule


class LineRangeError(ExecutionError):
    """A read's range starts past the file's last line."""

    code = "out_of_range"


class GitIdentityMissingError(ExecutionError):
    """A commit needs the user's name and email, and their git config names neither."""

    code = "git_identity_missing"


class ChangesWouldBeLostError(RefusedError):
    """A git write would overwrite changes that are not committed; nothing ran."""

    code = "changes_would_be_lost"


class SecretUnmaskedError(RefusedError):
    """A write would put a secret kept behind a mask where a read no longer masks it; nothing written."""

    code = "secret_unmasked"
