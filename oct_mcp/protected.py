"""Protected paths: what no write may touch, whatever the profile, and the rule each falls under."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from oct_mcp.config import McpConfig

__all__ = [
    "GIT_DIRECTORY_RULE",
    "GIT_RULE",
    "PROTECTED_RULES",
    "SERVER_FILES_RULE",
    "ProtectedPaths",
    "ProtectedRule",
    "git_directory_made",
    "git_directory_markers",
    "is_git_directory",
    "rule_for_parts",
]


@dataclass(frozen=True, slots=True)
class ProtectedRule:
    """One rule: a name for messages, what it protects, and how it matches a relative path."""

    name: str
    why: str
    components: frozenset[str] = frozenset()
    """Any path component with one of these names (a folder anywhere, or a file anywhere)."""
    prefixes: tuple[tuple[str, ...], ...] = ()
    """Paths starting with these components, from the project root."""

    def matches(self, parts: tuple[str, ...]) -> bool:
        return any(part in self.components for part in parts) or any(
            parts[: len(prefix)] == prefix for prefix in self.prefixes
        )


def _names(*names: str) -> frozenset[str]:
    return frozenset(name.casefold() for name in names)


# pre-commit, husky, lefthook and a hooks folder set as core.hooksPath: what runs on a commit or push.
_GIT_HOOK_MANAGERS: Final = (
    ".pre-commit-config.yaml",
    ".husky",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    ".lefthook",
    ".githooks",
)

# Names compare case-folded: on macOS and Windows `.GIT/config` is `.git/config`.
GIT_RULE: Final = ProtectedRule("git", "the repository's own data", components=_names(".git"))
PROTECTED_RULES: Final = (
    GIT_RULE,
    ProtectedRule(
        "oct_mcp_config",
        "oct-mcp's own state and repo-level config",
        components=_names(".oct-mcp", ".octrc.json", "debug_config.json"),
    ),
    ProtectedRule(
        "ci",
        "CI pipelines, which run with the repository's secrets",
        components=_names(
            ".gitlab-ci.yml",
            ".travis.yml",
            "azure-pipelines.yml",
            "bitbucket-pipelines.yml",
            ".drone.yml",
            "jenkinsfile",
            ".circleci",
            ".buildkite",
        ),
        prefixes=((".github", "workflows"), (".github", "actions")),
    ),
    ProtectedRule(
        "git_hooks",
        "git hook managers' configuration, which runs commands on the user's next commit or push",
        components=_names(*_GIT_HOOK_MANAGERS),
    ),
    ProtectedRule(
        "agent_config",
        "agent and IDE configuration, which can run commands or steer an agent",
        components=_names(".vscode", ".idea", ".claude", ".cursor", ".mcp.json", ".devcontainer", ".zed"),
    ),
    ProtectedRule(
        "shell_rc",
        "shell start-up files, which run on every new shell",
        components=_names(
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".cshrc",
            ".tcshrc",
            ".kshrc",
            ".envrc",
            "config.fish",
        ),
    ),
)

SERVER_FILES_RULE: Final = ProtectedRule("server_files", "oct-mcp's config, policy and audit files")


GIT_DIRECTORY_RULE: Final = ProtectedRule(
    "git_directory", "a git directory (a HEAD beside objects/ and refs/, or beside a commondir)"
)

_GIT_HEAD: Final = "head"
_GIT_STORES: Final = frozenset({"objects", "refs"})
_GIT_COMMONDIR: Final = "commondir"
# As git spells them on disk; compared case-folded.
_GIT_MARKERS: Final = ("HEAD", *sorted(_GIT_STORES), _GIT_COMMONDIR)
_FOLDED_GIT_MARKERS: Final = frozenset(marker.casefold() for marker in _GIT_MARKERS)


def is_git_directory(names: Iterable[str]) -> bool:
    """A folder with these entries is one git would open as a repository.

    As git's own test (setup.c, is_git_directory): a HEAD, and objects/ and refs/ beside it or in
    the folder a `commondir` file names. What HEAD holds and where the commondir points are not
    checked: a folder in a project that comes that close is refused as if it were one. Names
    compare case-folded: on macOS and Windows git finds `head` as `HEAD`.
    """
    present = {name.casefold() for name in names}
    return _GIT_HEAD in present and (present >= _GIT_STORES or _GIT_COMMONDIR in present)


def git_directory_made(root: Path, written: Iterable[Path]) -> Path | None:
    """The folder that writing `written` (absolute, inside `root`) would make a git directory, if any.

    What is on disk now and what the same call creates count together: a patch that adds
    `src/HEAD`, `src/objects/.keep` and `src/refs/.keep` makes `src/` one. The root itself is not
    checked: a project that is a bare repository was chosen as one.
    """
    markers: dict[Path, set[str]] = {}
    for path in written:
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            continue
        for depth in range(1, len(parts)):
            folder = root.joinpath(*parts[:depth])
            markers.setdefault(folder, set())
            if parts[depth].casefold() in _FOLDED_GIT_MARKERS:
                markers[folder].add(parts[depth])
    for folder, created in sorted(markers.items()):
        if is_git_directory(created | git_directory_markers(str(folder))):
            return folder
    return None


def git_directory_markers(folder: str) -> frozenset[str]:
    """Which of the names `is_git_directory` looks for are in `folder` on disk now."""
    found = set()
    for name in _GIT_MARKERS:
        if os.path.lexists(os.path.join(folder, name)):
            found.add(name)
    return frozenset(found)


def rule_for_parts(parts: tuple[str, ...], *, is_folder: bool = True) -> ProtectedRule | None:
    """The rule for a path; for anything but a real folder, also for one on the way to a protected
    prefix: a `.github` that is a symlink leads to a `.github/workflows` somewhere else."""
    for rule in PROTECTED_RULES:
        if rule.matches(parts):
            return rule
        if not is_folder and any(prefix[: len(parts)] == parts for prefix in rule.prefixes):
            return rule
    return None


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """The rules, plus the server's own files wherever they are, for one project root."""

    root: Path
    server_files: frozenset[Path] = frozenset()
    """Absolute paths of the config, policy and audit files and the checkpoints' folder; an audit
    log's rotations share its name, and a folder protects what is in it."""

    @classmethod
    def for_root(cls, root: Path, server_files: Iterable[str | os.PathLike[str]]) -> ProtectedPaths:
        resolved = frozenset(Path(os.path.abspath(os.path.expanduser(p))).resolve() for p in server_files)
        return cls(root=root, server_files=resolved)

    @classmethod
    def for_config(
        cls, config: McpConfig, root: Path, server_files: Iterable[str | os.PathLike[str]]
    ) -> ProtectedPaths:
        """The table the layers share: the project, the audit log, checkpoints, config and policy files
        (`server_files`: the server's own, `LayerRuntime.server_files`)."""
        return cls.for_root(root, [config.audit_log_path, config.checkpoint_dir, *server_files])

    def rule_for(self, path: Path) -> ProtectedRule | None:
        """The rule that protects `path` (absolute, inside the root), or None.

        Both the lexical path and the path with symlinks resolved are checked:
        a link named `notes` that points at `.git` is `.git`.
        """
        for candidate in (Path(os.path.normpath(path)), path.resolve()):
            if self._is_server_file(candidate):
                return SERVER_FILES_RULE
            try:
                relative = candidate.relative_to(self.root)
            except ValueError:
                continue
            parts = PurePosixPath(relative.as_posix()).parts
            rule = rule_for_parts(tuple(part.casefold() for part in parts))
            if rule is not None:
                return rule
            if any(
                is_git_directory(git_directory_markers(str(self.root.joinpath(*parts[:depth]))))
                for depth in range(1, len(parts))
            ):
                return GIT_DIRECTORY_RULE
        return None

    def _is_server_file(self, path: Path) -> bool:
        # An audit log rotates to `audit.log.1`, `audit.log.2`, ...: protect the whole family; a
        # folder (the checkpoints') with everything in it.
        return any(
            path.is_relative_to(protected)
            or (path.parent == protected.parent and path.name.startswith(protected.name + "."))
            for protected in self.server_files
        )
