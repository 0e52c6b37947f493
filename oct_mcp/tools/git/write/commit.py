"""oct_git_commit: commit what is staged, every staged path listed in the question, protected
ones marked and committed only when a human approved that list."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, Field

from oct_mcp.errors import (
    ExecutionError,
    GitIdentityMissingError,
    PolicyError,
)
from oct_mcp.preview import FileChange, Preview, commit_target
from oct_mcp.spec import CommandPlan, Risk, RunResult, StrictParams, ToolEnv, ToolSpec
from oct_mcp.tools.git.diff import parse_diff
from oct_mcp.tools.git.runner import (
    git_failed,
)
from oct_mcp.tools.git.write.checks import bound_commit, no_withheld_staged
from oct_mcp.tools.git.write.identity import user_identity
from oct_mcp.tools.git.write.runner import (
    HEAD_FILE,
    INDEX_FILE,
    PREVIEW_CONTEXT,
    diff_arguments,
    dry_run_field,
    every_entry,
    file_targets,
    fixed_step,
    git_path,
    project_git,
    protected_rule,
    status_arguments,
    steps_plan,
    succeeded,
)
from oct_mcp.types import ToolResult

__all__ = ["GIT_COMMIT", "MESSAGE_MAX", "GitCommitOutput", "GitCommitParams", "check_message"]

MESSAGE_MAX: Final = 10_000


def check_message(value: str) -> str:
    """The message as committed: line ends made `\n`, trailing spaces and blank edges cut.

    Raises:
        ValueError: It is empty, or holds control or format characters (a tab aside).
    """
    text = "\n".join(line.rstrip() for line in value.replace("\r\n", "\n").split("\n")).strip("\n")
    if not text.strip():
        raise ValueError("the commit message is empty")
    if any(char not in "\n\t" and not char.isprintable() for char in text):
        raise ValueError("the commit message holds control or format characters")
    return text


class GitCommitParams(StrictParams):
    message: Annotated[str, AfterValidator(check_message)] = Field(
        min_length=1,
        max_length=MESSAGE_MAX,
    )
    dry_run: bool | None = dry_run_field()


class GitCommitOutput(BaseModel):
    branch: str
    parent: str | None
    """The commit the new one follows; None for the first commit."""
    files: list[str]
    added: int
    """Lines the staged changes add (in a dry run; 0 once committed)."""
    removed: int
    message: str
    author: str
    commit: str | None = None
    """The new commit's id, once made."""
    applied: bool


@dataclass
class _Head:
    branch: str | None = None
    commit: str | None = None
    staged: list[str] = field(default_factory=list)


def _head_and_staged(stdout: bytes) -> _Head:
    status = every_entry(stdout)
    staged = [
        git_path(e.path) for e in status.entries if e.kind != "untracked" and e.xy[:1] not in (".", "?")
    ]
    return _Head(branch=status.branch, commit=status.commit, staged=staged)


def _read_head(head: _Head, run: RunResult) -> None:
    """Fill `head` from the branch status: the branch, its commit and the staged files.

    Raises:
        ExecutionError: HEAD is detached, or nothing is staged.
    """
    found = _head_and_staged(succeeded(run, "read the status").stdout)
    head.branch, head.commit, head.staged = found.branch, found.commit, found.staged
    if head.branch is None:
        raise ExecutionError("HEAD is detached; switch to a branch first (oct_git_switch), then commit")
    if not head.staged:
        raise ExecutionError("nothing is staged to commit; stage changes first with oct_git_add")


def _identity_or_refuse() -> tuple[str, str]:
    identity = user_identity()
    if identity is None:
        raise GitIdentityMissingError(
            "a commit needs your name and email, and your git config (~/.gitconfig) has no plain "
            "user.name and user.email; set them with git config --global user.name and user.email"
        )
    return identity


def _commit_preview(params: GitCommitParams, env: ToolEnv) -> CommandPlan:
    workspace = env.workspace
    identity = _identity_or_refuse()
    git = project_git(env)
    head = _Head()

    def diff(run: RunResult) -> tuple[str, ...]:
        _read_head(head, run)
        no_withheld_staged(env, head.staged)
        return diff_arguments(cached=True)

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        staged = parse_diff(run.stdout, staged=True, truncated=run.truncated, context=PREVIEW_CONTEXT)
        changes = []
        for f in staged.files:
            rule = protected_rule(workspace, f.path)
            action = "commit" if rule is None else f"commit a protected path (rule {rule})"
            changes.append(FileChange(path=f.path, action=action, added=f.added or 0, removed=f.removed or 0))
        message = params.message
        shown = f"commit on {head.branch} after {head.commit or '(the first commit)'}\n" + "".join(
            f"  {line}\n" for line in message.split("\n")
        )
        preview = Preview(
            files=tuple(changes),
            diff=f"{shown}\n{staged.diff}",
            targets=(
                *file_targets(workspace, [c.path for c in changes], HEAD_FILE, INDEX_FILE),
                commit_target("HEAD", head.commit),
            ),
        )
        output = GitCommitOutput(
            branch=head.branch or "",
            parent=head.commit,
            files=[c.path for c in changes],
            added=staged.added,
            removed=staged.removed,
            message=message,
            author=f"{identity[0]} <{identity[1]}>",
            applied=False,
        )
        return ToolResult(text=_commit_text(output), structured=output.model_dump(), preview=preview)

    return steps_plan(git, [fixed_step(*status_arguments(untracked=False, branch=True)), diff], parse)


def _commit_text(output: GitCommitOutput) -> str:
    head = (
        f"committed {output.commit[:12]} on {output.branch}"
        if output.applied and output.commit
        else f"dry run, nothing changed: would commit on {output.branch}"
    )
    counts = "" if output.applied else f", +{output.added} -{output.removed}"
    lines = [
        f"{head}, {len(output.files)} file(s){counts}, as {output.author}:",
        *(f"  {path}" for path in output.files),
        "",
        output.message,
    ]
    return "\n".join(lines)


def _plan_commit(params: GitCommitParams, env: ToolEnv) -> CommandPlan:
    if env.dry_run_for(params.dry_run):
        return _commit_preview(params, env)
    workspace = env.workspace
    identity = _identity_or_refuse()
    git = project_git(
        env, files=("index", "logs/HEAD"), folders=("objects", "refs", "logs"), identity=identity, write=True
    )
    message = params.message
    head = _Head()

    def commit(run: RunResult) -> tuple[str, ...]:
        _read_head(head, run)
        no_withheld_staged(env, head.staged)
        bound_commit(
            env,
            "HEAD",
            head.commit,
            "the branch moved to another commit after the question the user approved, so nothing was "
            "committed; call the tool again to preview the commit as it is now",
        )
        shown = {t.path for t in env.approved_targets} if env.approved_targets is not None else set()
        for path in head.staged:
            rule = protected_rule(workspace, path)
            if rule is not None and path not in shown:
                raise PolicyError(
                    f"a protected path is staged (protected path rule: {rule}), and no human approved a "
                    "question that listed it; commit it yourself, or through a client that can ask you"
                )
        return (
            "commit",
            "--no-verify",
            "--no-gpg-sign",
            "--no-edit",
            "--cleanup=whitespace",
            "--quiet",
            f"--message={message}",
        )

    def made(run: RunResult) -> tuple[str, ...]:
        succeeded(run, "commit")
        return ("rev-parse", "--verify", "--quiet", "HEAD")

    def parse(run: RunResult) -> ToolResult:
        if run.exit_code != 0:
            return git_failed(run)
        output = GitCommitOutput(
            branch=head.branch or "",
            parent=head.commit,
            files=head.staged,
            added=0,
            removed=0,
            message=message,
            author=f"{identity[0]} <{identity[1]}>",
            commit=run.stdout.decode("ascii", errors="replace").strip(),
            applied=True,
        )
        return ToolResult(text=_commit_text(output), structured=output.model_dump())

    return steps_plan(git, [fixed_step(*status_arguments(untracked=False, branch=True)), commit, made], parse)


GIT_COMMIT: Final = ToolSpec(
    name="oct_git_commit",
    title="Git commit",
    description="Commit what is staged with a message, as the user's git identity; no hooks, never pushes.",
    params=GitCommitParams,
    output=GitCommitOutput,
    risk=Risk.WRITE,
    plan=_plan_commit,
    preview=_commit_preview,
    idempotent=False,
    session_grants=False,
)
