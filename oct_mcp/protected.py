"""Protected paths: what no write may touch, whatever the profile, and the rule each falls under."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

__all__ = [
    "PROTECTED_RULES",
    "ProtectedPaths",
    "ProtectedRule",
    "existing_protected_paths",
    "present_protected_names",
    "remove_created_protected_paths",
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
PROTECTED_RULES: Final = (
    ProtectedRule("git", "the repository's own data", components=_names(".git")),
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


# Where protected paths sit in a project, for a sandbox to keep them read-only in a writable run.
_TOP_LEVEL_CANDIDATES: Final = (
    ".git",
    ".oct-mcp",
    ".octrc.json",
    "debug_config.json",
    ".github/workflows",
    ".github/actions",
    ".gitlab-ci.yml",
    ".travis.yml",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    ".drone.yml",
    "Jenkinsfile",
    ".circleci",
    ".buildkite",
    *_GIT_HOOK_MANAGERS,
    ".vscode",
    ".idea",
    ".claude",
    ".cursor",
    ".mcp.json",
    ".devcontainer",
    ".zed",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".envrc",
)


def present_protected_names(root: Path) -> frozenset[str]:
    """The usual protected paths in the project now, symlinks included: what a writable run starts with."""
    return frozenset(name for name in _TOP_LEVEL_CANDIDATES if os.path.lexists(root / name))


def remove_created_protected_paths(
    root: Path, before: frozenset[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Remove the usual protected paths a writable run created: absent in `before`, present now.

    A sandbox can shield only the protected paths that exist (it binds them read-only; it cannot
    bind what is not there without creating it in the user's project). What a run created in
    their place is removed after it, before anything (git, an IDE) reads it. Never through a
    link: a path whose folder is no longer a real folder inside the root is left, and named.

    Returns:
        The names removed, and the names created but left because removing them was not safe.
    """
    removed: list[str] = []
    left: list[str] = []
    for name in _TOP_LEVEL_CANDIDATES:
        if name in before:
            continue
        path = root / name
        try:
            info = os.lstat(path)
        except OSError:
            continue  # not there (or a file on the way): nothing was created
        if os.path.realpath(path.parent) != os.path.normpath(path.parent):
            left.append(name)
            continue
        try:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            left.append(name)
            continue
        removed.append(name)
    return tuple(removed), tuple(left)


def existing_protected_paths(root: Path, present: frozenset[str]) -> tuple[Path, ...]:
    """The protected paths a writable run keeps read-only: those `present` (present_protected_names)
    at their usual places, less symlinks, which lead elsewhere."""
    return tuple(
        root / name for name in _TOP_LEVEL_CANDIDATES if name in present and not (root / name).is_symlink()
    )


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """The rules, plus the server's own files wherever they are, for one project root."""

    root: Path
    server_files: frozenset[Path] = frozenset()
    """Absolute paths of the config, policy and audit files; an audit log's rotations share its name."""

    @classmethod
    def for_root(cls, root: Path, server_files: Iterable[str | os.PathLike[str]]) -> ProtectedPaths:
        resolved = frozenset(Path(os.path.abspath(os.path.expanduser(p))).resolve() for p in server_files)
        return cls(root=root, server_files=resolved)

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
            parts = tuple(part.casefold() for part in PurePosixPath(relative.as_posix()).parts)
            for rule in PROTECTED_RULES:
                if rule.matches(parts):
                    return rule
        return None

    def _is_server_file(self, path: Path) -> bool:
        # An audit log rotates to `audit.log.1`, `audit.log.2`, ...: protect the whole family.
        return any(
            path == protected
            or (path.parent == protected.parent and path.name.startswith(protected.name + "."))
            for protected in self.server_files
        )
