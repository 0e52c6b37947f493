"""oct_git_log: a branch's commits as git records them, newest first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from pydantic import BaseModel, Field

from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
    ToolSpec,
)
from oct_mcp.tools._paging.results import BudgetField, OffsetField, take_within
from oct_mcp.tools.git.refs import GitRef
from oct_mcp.tools.git.runner import decoded_text, git_failed, git_plan, pathspec
from oct_mcp.types import ToolResult

__all__ = ["GIT_LOG", "LOG_DEFAULT", "LOG_MAX", "Commit", "GitLogParams", "LogOutput", "parse_log"]


LOG_DEFAULT: Final = 20


LOG_MAX: Final = 200


class GitLogParams(StrictParams):
    max_count: int = Field(default=LOG_DEFAULT, ge=1, le=LOG_MAX)
    path: ProjectPath | None = Field(default=None)
    base: GitRef | None = Field(
        default=None,
    )
    target: GitRef | None = Field(default=None)
    offset: int = OffsetField()
    max_chars: int = BudgetField()

    def refs(self) -> tuple[tuple[str, str], ...]:
        """(argument, ref) for each ref given."""
        given = (("base", self.base), ("target", self.target))
        return tuple((name, ref) for name, ref in given if ref is not None)


class Commit(BaseModel):
    sha: str
    author: str
    email: str
    date: str
    """Author date, strict ISO 8601."""
    subject: str


class LogOutput(BaseModel):
    commits: list[Commit]
    next_offset: int | None = None
    """The offset that shows the older commits after these (max_count or the budget was reached)."""


_LOG_FIELDS: Final = 5


def parse_log(stdout: bytes) -> LogOutput:
    """`git log -z --format=%H%x00%an%x00%ae%x00%aI%x00%s`: five NUL-separated fields per commit."""
    tokens = [decoded_text(token) for token in stdout.split(b"\0")]
    commits = [
        Commit(sha=sha, author=author, email=email, date=date, subject=subject)
        for sha, author, email, date, subject in zip(*[iter(tokens)] * _LOG_FIELDS, strict=False)
    ]
    return LogOutput(commits=commits)


def _log_parser(params: GitLogParams) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            if b"does not have any commits yet" in run.stderr:
                return ToolResult(
                    text="no commits yet", structured=LogOutput(commits=[]).model_dump(exclude_none=True)
                )
            return git_failed(run)
        # One commit past max_count was asked for: it tells whether more follow.
        every = parse_log(run.stdout).commits
        commits, cut = take_within(every[: params.max_count], params.max_chars)
        more = cut or len(every) > params.max_count
        output = LogOutput(commits=commits, next_offset=params.offset + len(commits) if more else None)
        lines = [f"{c.sha[:12]} {c.date} {c.author}: {c.subject}" for c in output.commits]
        if output.next_offset is not None:
            lines.append(f"[oct-mcp: older commits follow: offset={output.next_offset}]")
        return ToolResult(
            text="\n".join(lines) or "no commits", structured=output.model_dump(exclude_none=True)
        )

    return parse


def _plan_log(params: GitLogParams, env: ToolEnv) -> CommandPlan:
    options = (
        "log",
        "-z",
        f"--max-count={params.max_count + 1}",
        f"--skip={params.offset}",
        "--format=%H%x00%an%x00%ae%x00%aI%x00%s",
        "--no-show-signature",
        "--no-color",
    )
    paths = pathspec(env.workspace, params.path) or ["--"]

    def arguments(commits: Mapping[str, str]) -> tuple[str, ...]:
        # base..target, as git spells it: what target reaches and base does not.
        revisions = [f"^{commits['base']}"] if "base" in commits else []
        if revisions or "target" in commits:
            revisions.append(commits.get("target", "HEAD"))
        return (*options, "--end-of-options", *revisions, *paths)

    return git_plan(env, arguments, _log_parser(params), refs=params.refs())


GIT_LOG: Final = ToolSpec(
    name="oct_git_log",
    title="Git log",
    description=(
        "Commits newest first (sha, author, date, subject) of HEAD or target; with base only base..target; "
        "path: only commits touching it. Paged by next_offset."
    ),
    params=GitLogParams,
    output=LogOutput,
    risk=Risk.READ,
    plan=_plan_log,
)
