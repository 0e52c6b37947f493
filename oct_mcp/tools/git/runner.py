"""git as every git tool runs it: the server's own git, in the sandbox, defanged.

git (the server's, never one inside the project) runs in the sandbox with the project
read-only, on the repository at the project root only (`--git-dir`, `--work-tree`,
GIT_COMMON_DIR), without hooks, fsmonitor, pager, external diff, textconv, signature checks or
optional locks, and with every filter driver its config defines switched off: status and diff
would otherwise run a repository's clean filter, a command of its choosing, on each file whose
stat data changed. Which filters exist, git itself says: each call first lists its config's
names, in the same sandbox, and the real call switches off each filter.* name listed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from oct_mcp.errors import ExecutionError, GitConfigUnreadableError, NotFoundError
from oct_mcp.spec import (
    COMMAND_STEPS_MAX,
    CommandPlan,
    NextCommand,
    RunResult,
    ToolEnv,
)
from oct_mcp.tools._project.ignores import user_excludes_file
from oct_mcp.tools._project.programs import find_server_program
from oct_mcp.tools.git.layout import NOT_A_REPOSITORY, GitLayout, git_layout
from oct_mcp.tools.git.refs import verify_chain
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

__all__ = [
    "CONFIG_NAMES_LISTING",
    "GIT_ENVIRONMENT",
    "GIT_SAFETY_OPTIONS",
    "decoded_text",
    "filter_overrides",
    "git_argv",
    "git_failed",
    "git_plan",
    "listed_filter_names",
    "pathspec",
    "shown_pathspec",
]

GIT_SAFETY_OPTIONS: Final = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.pager=cat",
    # Empty: no external diff command, ever (diff also passes --no-ext-diff).
    "-c",
    "diff.external=",
    "-c",
    "core.editor=true",
    # log.showSignature would run gpg.program, a command the repository's config may name.
    "-c",
    "log.showSignature=false",
    "-c",
    "color.ui=false",
    "--no-pager",
    "--no-optional-locks",
    # Paths are paths: no pathspec magic such as ':(top)' or globs.
    "--literal-pathspecs",
)


# Where git is given exclusions (`shown_pathspec`), every pathspec carries its own magic instead.
_MAGIC_SAFETY_OPTIONS: Final = tuple(
    option for option in GIT_SAFETY_OPTIONS if option != "--literal-pathspecs"
)


GIT_ENVIRONMENT: Final = (
    # No transport at all, whatever the repository's config says: with this set, git ignores every
    # `protocol.*` key (a repository's `protocol.file.allow=always` beats a `-c protocol.allow=never`)
    # and allows only the protocols listed, none. A fetch would run a program the config names
    # (`remote.<name>.uploadpack`, `core.sshCommand`, an `ext::` URL), and a partial clone fetches a
    # missing object on demand ("lazy fetch") from status, diff or add alike.
    ("GIT_ALLOW_PROTOCOL", ""),
    # The same lazy fetch, switched off where git knows the variable (2.45 and later).
    ("GIT_NO_LAZY_FETCH", "1"),
)


_FILTER_NAMES_MAX: Final = 64


CONFIG_NAMES_LISTING: Final = ("config", "--list", "--includes", "--null", "--name-only")


def listed_filter_names(run: RunResult) -> frozenset[str]:
    """The filter driver names in `git config --list --includes --null --name-only`, as git read them.

    Raises:
        GitConfigUnreadableError: git could not list its config, or the list was cut.
    """
    if run.exit_code != 0 or run.truncated or run.timed_out:
        raise GitConfigUnreadableError(
            "git could not list the repository's config, so its filter drivers cannot be switched off; "
            "git was not run (git config --list shows what is wrong)"
        )
    names = set()
    for raw in run.stdout.split(b"\0"):
        key = os.fsdecode(raw)
        if key[:7].lower() == "filter." and key.count(".") >= 2:
            names.add(key[7 : key.rindex(".")])
    return frozenset(names)


def filter_overrides(names: frozenset[str]) -> list[str]:
    """`-c filter.<name>.clean=` and its siblings for each name: an empty command is no command.

    Raises:
        ExecutionError: A name `-c` cannot address (it holds `=`), or too many names.
    """
    if len(names) > _FILTER_NAMES_MAX or any("=" in name for name in names):
        raise ExecutionError(
            "the repository's git config defines filter drivers that cannot be switched off "
            "(over 64, or a name with '='); git was not run"
        )
    options: list[str] = []
    for name in sorted(names):
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            options += ["-c", f"filter.{name}.{key}={value}"]
    return options


def git_argv(root: Path, *arguments: str, filter_names: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """git's argv for the repository at `root`, every safety option and filter override before the subcommand.

    Raises:
        NotFoundError: The project root is not a git repository.
        GitLayoutRefusedError: Its `.git` names git folders that are not its own.
        ToolUnavailableError: git is not on the server's PATH.
        ExecutionError: The filter drivers cannot be switched off.
    """
    return _argv(find_server_program(root, "git"), git_layout(root), root, filter_names, arguments)


def _argv(
    program: Path,
    layout: GitLayout,
    root: Path,
    filter_names: frozenset[str],
    arguments: tuple[str, ...],
    *,
    magic: bool = False,
) -> tuple[str, ...]:
    return (
        str(program),
        *(_MAGIC_SAFETY_OPTIONS if magic else GIT_SAFETY_OPTIONS),
        *filter_overrides(filter_names),
        f"--git-dir={layout.git_dir}",
        f"--work-tree={root}",
        *arguments,
    )


def git_plan(
    env: ToolEnv,
    arguments: tuple[str, ...] | Callable[[Mapping[str, str]], tuple[str, ...]],
    parse: Callable[[RunResult], ToolResult],
    *,
    user_excludes: bool = False,
    refs: Sequence[tuple[str, str]] = (),
    before: tuple[Callable[[Mapping[str, str]], tuple[str, ...]], Callable[[RunResult], None]] | None = None,
    magic: bool = False,
) -> CommandPlan:
    """git run in steps in the same sandbox: it lists its config's names, resolves each ref, then runs
    with each filter off.

    The same binary, environment, git folders and working directory read the config each time,
    so the list names every filter driver the real call would see (includes, any spelling).
    With `user_excludes`, the user's global excludes file is named with `-c core.excludesFile` and
    bound read-only: git never loads the global config, so it would not find the file itself.
    With `refs` ((argument name, ref) pairs, checked as `GitRef`), each ref is resolved to the
    commit it names before the real call (`verify_chain`), and `arguments` is given the verified
    commit ids by argument name: the real call never sees a ref's text.
    With `before` (arguments given the commit ids, and what takes its output), one more git command
    runs just before the real call, in the same sandbox: what the real call shows, read whole.
    With `magic`, git reads pathspec magic (`shown_pathspec` spells every pathspec with its own);
    without, every path is literal.
    """
    if len(refs) > COMMAND_STEPS_MAX - 2 - (before is not None):
        raise ValueError(f"a git plan runs at most {COMMAND_STEPS_MAX} commands, its config listing included")
    root = env.workspace.root
    layout = git_layout(root)
    program = find_server_program(root, "git")
    excludes = user_excludes_file() if user_excludes else None
    options = () if excludes is None else ("-c", f"core.excludesFile={excludes}")
    real = arguments if callable(arguments) else lambda _: arguments

    def after_config(run: RunResult) -> tuple[str, ...] | NextCommand:
        names = listed_filter_names(run)

        def git(step: tuple[str, ...]) -> tuple[str, ...]:
            return _argv(program, layout, root, names, step, magic=magic)

        def real_argv(commits: Mapping[str, str]) -> tuple[str, ...]:
            return git((*options, *real(commits)))

        if before is None:
            return verify_chain(refs, git, lambda commits: (*options, *real(commits)))
        prelude, take = before

        def first_before(commits: Mapping[str, str]) -> NextCommand:
            def then(prelude_run: RunResult) -> tuple[str, ...]:
                take(prelude_run)
                return real_argv(commits)

            return NextCommand(argv=git(prelude(commits)), then=then)

        return verify_chain(refs, git, lambda commits: (*options, *real(commits)), finish=first_before)

    return CommandPlan(
        argv=_argv(program, layout, root, frozenset(), CONFIG_NAMES_LISTING),
        then=after_config,
        parse=parse,
        read_only_paths=(*layout.binds, *(() if excludes is None else (excludes,))),
        tool_env=(("GIT_COMMON_DIR", str(layout.common_dir)), *GIT_ENVIRONMENT),
        # git, not project code, with fixed arguments: it compares and diffs the real files.
        masks_secret_files=False,
        resolves_localhost=False,
    )


def pathspec(workspace: Workspace, path: str | None) -> list[str]:
    """The path after `--`, as git names it: relative, lexical (a symlink is the link, as in git)."""
    if path is None:
        return []
    workspace.contain(path)
    lexical = Path(os.path.normpath(workspace.root / path))
    return ["--", lexical.relative_to(workspace.root).as_posix() or "."]


def shown_pathspec(env: ToolEnv, path: str | None) -> tuple[list[str], bool]:
    """`pathspec`, and after it git's exclusions of the paths the rules deny the call (`ToolEnv.withheld`),
    so a status, a diff or a commit shown leaves them out, a rename's old name included; and whether
    git must read pathspec magic for them (`git_plan`'s `magic`), the path then spelt `:(literal)`."""
    named = pathspec(env.workspace, path)
    exclusions = env.withheld.git_exclusions() if env.withheld is not None else ()
    if not exclusions:
        return named, False
    return ["--", *(f":(literal){given}" for given in named[1:]), *exclusions], True


def git_failed(run: RunResult) -> ToolResult:
    detail = run.stderr.decode(errors="replace").strip()
    if "not a git repository" in detail:
        raise NotFoundError(NOT_A_REPOSITORY)
    return ToolResult(
        text=f"[tool_failed] git failed (exit code {run.exit_code}); the end of its stderr says why, and "
        f"`git status` in a terminal in the project shows the same:\n{detail[-4_000:]}",
        is_error=True,
    )


def decoded_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
