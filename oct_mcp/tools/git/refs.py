"""Git refs a call names: checked as text by the validator, then resolved to a commit by git before use.

Two checks, as the reference git server makes them. First the text (`GitRef`, at validation): a
ref is a branch, tag or remote name, `HEAD`, `@`, or a commit id, optionally followed by one
`@{upstream}`, `@{u}`, `@{push}`, `@{N}` or `@{-N}` and then any `~N`, `^` or `^N` steps. That is
the subset of git's revision syntax (gitrevisions(7)) that names one commit without reading a
path or a message, and its name part keeps to `git check-ref-format --allow-onelevel` (no
component starting with `.` or ending with `.lock`, no `//`, no `..`, not ending with `/` or
`.`), stricter in refusing `{` and `}` and every control or format character (Unicode category
C). Refused: a leading `-` (an option: `--output=<file>` would make git write a file), ranges
(`a..b`, `a...b`: the tools take `base` and `target`), `rev:path` and `:/text`, globs, `@{date}`
(which holds spaces), and anything over `REF_MAX_LENGTH` characters.

Then git (`verify_chain`, a step of the plan in the sandbox): each ref is resolved with
`git rev-parse --verify --quiet --end-of-options <ref>^{commit}`, so a ref that names a path, a
tree, a blob or nothing stops the call with the argument named, and the command that follows
receives the verified object id, never the text the call sent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Final

from pydantic import AfterValidator, StringConstraints

from oct_mcp.errors import ExecutionError, NotFoundError
from oct_mcp.spec import NextCommand, RunResult

__all__ = [
    "REF_MAX_LENGTH",
    "GitRef",
    "check_ref",
    "verified_commit",
    "verify_arguments",
    "verify_chain",
]

REF_MAX_LENGTH: Final = 256
_COMPONENT: Final = r"(?!\.)[^/~^:?*\[\\{}\s]+"
_NAME: Final = rf"{_COMPONENT}(?:/{_COMPONENT})*"
_REFLOG: Final = r"@\{(?:upstream|u|push|-?[0-9]{1,6})\}"
_STEPS: Final = r"(?:~[0-9]{0,6}|\^[0-9]?)*"
_REF: Final = re.compile(rf"(?P<name>{_NAME})?(?P<reflog>{_REFLOG})?{_STEPS}")
_OBJECT_ID: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SYNTAX: Final = (
    "a ref is a branch, tag or remote name, HEAD or a commit id, optionally followed by @{upstream}, "
    "@{N}, ~N or ^N; no paths (rev:path), globs, spaces or other revision syntax"
)


def check_ref(ref: str) -> str:
    """`ref` if its text is one a git tool accepts (see the module's docstring).

    Raises:
        ValueError: It is not; the message says which rule, never the ref (the validator turns it
            into `InvalidArgumentsError`).
    """
    if not ref:
        raise ValueError("a ref cannot be empty")
    if len(ref) > REF_MAX_LENGTH:
        raise ValueError(f"a ref is at most {REF_MAX_LENGTH} characters")
    if ref.startswith("-"):
        raise ValueError("a ref cannot start with '-' (git would read it as an option)")
    if any(unicodedata.category(char).startswith("C") for char in ref):
        raise ValueError("a ref cannot hold control or format characters")
    if ".." in ref:
        raise ValueError(
            "a ref cannot hold '..': for a range, give its two ends as base and target "
            "(and merge_base=true for what 'base...target' means)"
        )
    match = _REF.fullmatch(ref)
    if match is None or (match["name"] is None and match["reflog"] is None):
        raise ValueError(_SYNTAX)
    name = match["name"] or ""
    if name.endswith(".") or any(component.endswith(".lock") for component in name.split("/")):
        raise ValueError("a ref name cannot end with '.' or have a part ending with '.lock'")
    return ref


GitRef = Annotated[str, StringConstraints(min_length=1, max_length=REF_MAX_LENGTH), AfterValidator(check_ref)]
"""A ref argument, its text checked by `check_ref`; a plan resolves it with `verify_chain` before use."""


def verify_arguments(ref: str) -> tuple[str, ...]:
    """git's arguments that print the commit `ref` names, or fail: the ref after `--end-of-options`,
    peeled to a commit so a tag of a tree, a tree or a blob id is no commit."""
    return ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")


def verified_commit(run: RunResult, argument: str) -> str:
    """The commit id `git rev-parse --verify` printed for the ref given as `argument`.

    Raises:
        NotFoundError: The ref names no commit (a path, a tree, a missing branch, no upstream).
        ExecutionError: git printed something that is no object id.
    """
    if run.exit_code != 0:
        raise NotFoundError(
            f"the {argument} argument names no commit in this repository (a branch, a tag, a commit id "
            "or HEAD~N does; a path or a tree does not); oct_git_log lists the commits"
        )
    oid = run.stdout.decode("ascii", errors="replace").strip()
    if run.truncated or _OBJECT_ID.fullmatch(oid) is None:
        raise ExecutionError(f"git resolved the {argument} argument to no object id; git was not run further")
    return oid


def verify_chain(
    refs: Sequence[tuple[str, str]],
    git: Callable[[tuple[str, ...]], tuple[str, ...]],
    arguments: Callable[[Mapping[str, str]], tuple[str, ...]],
    resolved: Mapping[str, str] | None = None,
    finish: Callable[[Mapping[str, str]], tuple[str, ...] | NextCommand] | None = None,
) -> tuple[str, ...] | NextCommand:
    """The steps that resolve each (argument, ref) in turn, then the argv of the real command.

    Args:
        refs: (argument name, checked ref) pairs, resolved in this order.
        git: git's full argv for a subcommand's arguments (safety options first).
        arguments: The real command's arguments, given each argument's verified commit id.
        resolved: The commit ids verified so far, by argument name.
        finish: What follows once every ref is resolved, given the commit ids; None: the real
            command's argv (a step may come between, such as reading the file a command shows).

    Returns:
        The real command's argv when every ref is resolved, else the step that resolves the next.
    """
    done = dict(resolved or {})
    if not refs:
        return git(arguments(done)) if finish is None else finish(done)
    (argument, ref), rest = refs[0], refs[1:]

    def resolve(run: RunResult) -> tuple[str, ...] | NextCommand:
        commits = {**done, argument: verified_commit(run, argument)}
        return verify_chain(rest, git, arguments, commits, finish)

    return NextCommand(argv=git(verify_arguments(ref)), then=resolve)
