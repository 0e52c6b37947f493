"""Protected paths: what no write may touch, whatever the profile, and the rule each falls under."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from oct_mcp.types import LayerRuntime

__all__ = [
    "GIT_DIRECTORY_RULE",
    "GIT_RULE",
    "PROTECTED_RULES",
    "SNAPSHOT_MAX_ENTRIES",
    "Fingerprint",
    "ProjectTooLargeError",
    "ProtectedChanges",
    "ProtectedPaths",
    "ProtectedRule",
    "ProtectedSnapshot",
    "git_directory_made",
    "is_git_directory",
    "settle_protected_paths",
    "snapshot_protected",
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

# What git itself rewrites inside a repository's folder as it works (an IDE's `git status` on the
# host, a fetch): left out of the comparison after a writable run, which would otherwise fail on
# them. None of them makes git run a program.
_GIT_CHURN: Final = frozenset(
    {"objects", "logs", "lfs", "index", "FETCH_HEAD", "ORIG_HEAD", "packed-refs", "refs", "COMMIT_EDITMSG"}
)
_GIT_HEAD: Final = "head"
_GIT_STORES: Final = frozenset({"objects", "refs"})
_GIT_COMMONDIR: Final = "commondir"
# As git spells them on disk; compared case-folded.
_GIT_MARKERS: Final = ("HEAD", *sorted(_GIT_STORES), _GIT_COMMONDIR)
_FOLDED_GIT_MARKERS: Final = frozenset(marker.casefold() for marker in _GIT_MARKERS)
SNAPSHOT_MAX_ENTRIES: Final = 200_000
"""Files and folders the protected-path walk visits before it gives up (and the run is refused)."""


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


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What identifies one entry and what changes when it is written, moved or replaced.

    Folders by identity only: their entries are compared one by one. Files by size and by
    both times as well: ctime moves on any write or rename and cannot be set back by a program.
    """

    kind: int
    device: int
    inode: int
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    link: str | None = None

    @classmethod
    def of(cls, path: str) -> Fingerprint | None:
        try:
            info = os.lstat(path)
        except OSError:
            return None
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFDIR:
            return cls(kind, info.st_dev, info.st_ino)
        link = None
        if kind == stat.S_IFLNK:
            try:
                link = os.readlink(path)
            except OSError:
                link = ""
        return cls(kind, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, link)

    @property
    def identity(self) -> tuple[int, int]:
        return self.device, self.inode


@dataclass(frozen=True, slots=True)
class ProtectedSnapshot:
    """The protected paths of a project at one moment, at any depth, and everything inside them."""

    roots: Mapping[str, ProtectedRule]
    """Each protected path not inside another one (project-relative, POSIX), and its rule."""
    entries: Mapping[str, Fingerprint]
    """The roots and every entry below them (git's own churn left out), by project-relative path."""

    def bind_paths(self, root: Path) -> tuple[Path, ...]:
        """The roots a sandbox keeps read-only, symlinks (which lead elsewhere) left out.

        Repositories first, then the shallowest: a sandbox that can mount only so many keeps
        those whose config git runs from.
        """
        git_rules = (GIT_RULE, GIT_DIRECTORY_RULE)
        return tuple(
            root / name
            for name in sorted(
                self.roots, key=lambda name: (self.roots[name] not in git_rules, name.count("/"))
            )
            if self.entries[name].kind != stat.S_IFLNK
        )


class ProjectTooLargeError(Exception):
    """The walk met more entries than SNAPSHOT_MAX_ENTRIES."""


def snapshot_protected(root: Path, limit: int = SNAPSHOT_MAX_ENTRIES) -> ProtectedSnapshot:
    """Every protected path in the project, at any depth, by the rules of PROTECTED_RULES.

    One readdir per folder and no stat for an entry that is no protected path (the entry's type
    comes with readdir), so the walk costs little more than listing the tree; inside a protected
    folder each entry is fingerprinted. Symlinks are recorded, never followed.

    Raises:
        ProjectTooLargeError: The project holds more than `limit` entries.
    """
    roots: dict[str, ProtectedRule] = {}
    entries: dict[str, Fingerprint] = {}
    top = str(root)
    pending: list[tuple[str, tuple[str, ...]]] = [(top, ())]
    seen = 0
    while pending:
        folder, parts = pending.pop()
        try:
            with os.scandir(folder) as listing:
                found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
        except OSError:
            continue
        seen += len(found)
        if seen > limit:
            raise ProjectTooLargeError
        if parts and is_git_directory(name for name, _ in found):
            relative = "/".join(parts)
            roots[relative] = GIT_DIRECTORY_RULE
            seen = _fingerprint_tree(folder, relative, entries, seen, limit, git=True)
            continue
        # The folders on the way hold no protected name (the walk stops at one): only the entry's own
        # name is looked up, and the prefixes only this near the root.
        near_root = len(parts) < _LONGEST_PREFIX
        for name, is_folder in found:
            rule = _BY_COMPONENT.get(name.casefold())
            if rule is None and near_root:
                folded = (*(part.casefold() for part in parts), name.casefold())
                rule = _rule_for_parts(folded, is_folder=is_folder)
            if rule is not None:
                relative = "/".join((*parts, name))
                path = os.path.join(folder, name)
                roots[relative] = rule
                seen = _fingerprint_tree(path, relative, entries, seen, limit, git=rule is GIT_RULE)
            elif is_folder:
                pending.append((os.path.join(folder, name), (*parts, name)))
    return ProtectedSnapshot(roots=roots, entries=entries)


_BY_COMPONENT: Final = {name: rule for rule in reversed(PROTECTED_RULES) for name in rule.components}
_LONGEST_PREFIX: Final = max(len(prefix) for rule in PROTECTED_RULES for prefix in rule.prefixes)


def _rule_for_parts(parts: tuple[str, ...], *, is_folder: bool = True) -> ProtectedRule | None:
    """The rule for a path; for anything but a real folder, also for one on the way to a protected
    prefix: a `.github` that is a symlink leads to a `.github/workflows` somewhere else."""
    for rule in PROTECTED_RULES:
        if rule.matches(parts):
            return rule
        if not is_folder and any(prefix[: len(parts)] == parts for prefix in rule.prefixes):
            return rule
    return None


def _fingerprint_tree(
    path: str, relative: str, entries: dict[str, Fingerprint], seen: int, limit: int, *, git: bool
) -> int:
    """Fingerprint `path` and, for a folder, everything below it; returns the entries seen so far."""
    fingerprint = Fingerprint.of(path)
    if fingerprint is None:
        return seen
    entries[relative] = fingerprint
    if fingerprint.kind != stat.S_IFDIR:
        return seen
    pending = [(path, relative)]
    while pending:
        folder, name = pending.pop()
        try:
            with os.scandir(folder) as listing:
                found = [entry.name for entry in listing]
        except OSError:
            continue
        seen += len(found)
        if seen > limit:
            raise ProjectTooLargeError
        for child in found:
            if git and (child in _GIT_CHURN or child.endswith(".lock")):
                continue
            child_path, child_relative = os.path.join(folder, child), f"{name}/{child}"
            child_print = Fingerprint.of(child_path)
            if child_print is None:
                continue
            entries[child_relative] = child_print
            if child_print.kind == stat.S_IFDIR:
                pending.append((child_path, child_relative))
    return seen


@dataclass(frozen=True, slots=True)
class ProtectedChanges:
    """What a writable run did to protected paths, by project-relative path."""

    removed: tuple[str, ...] = ()
    """Created by the run, and removed again."""
    left: tuple[str, ...] = ()
    """Created by the run, but left: removing it was not safe (a link on the way, a moved original
    inside, a folder made a git directory) or failed."""
    changed: tuple[str, ...] = ()
    """There before, and written, replaced, moved away or deleted by the run."""
    unchecked: bool = False
    """The project grew past the walk's limit during the run: nothing could be compared."""

    def __bool__(self) -> bool:
        return bool(self.removed or self.left or self.changed or self.unchecked)


def settle_protected_paths(root: Path, before: ProtectedSnapshot) -> ProtectedChanges:
    """Compare the protected paths after a writable run with `before`; remove those the run created.

    A sandbox can shield only the protected paths that exist (it binds them read-only; it
    cannot bind what is not there without creating it in the user's project), and on a backend
    that confines nothing it shields none: this is the backstop. What the run created is removed
    before anything (git, an IDE) reads it, never through a link and never with anything that was
    there before inside it; what it changed, moved or deleted is named.

    Raises:
        ProjectTooLargeError: The project grew past the walk's limit during the run.
    """
    after = snapshot_protected(root)
    known = {fingerprint.identity for fingerprint in before.entries.values()}
    # Each before root whose path now holds something else: the run put that there.
    replaced = {
        name
        for name in before.roots
        if name in after.entries and after.entries[name].identity != before.entries[name].identity
    }
    created = {name: rule for name, rule in after.roots.items() if name not in before.roots}
    created.update((name, before.roots[name]) for name in replaced)
    changed = sorted(
        name
        for name in before.entries.keys() | after.entries.keys()
        if _inside(name, before.roots) and before.entries.get(name) != after.entries.get(name)
    )
    removed: list[str] = []
    left: list[str] = []
    for name, rule in sorted(created.items()):
        path = root / name
        if (
            rule is GIT_DIRECTORY_RULE
            or any(entry.identity in known for path, entry in after.entries.items() if _inside(path, (name,)))
            or os.path.realpath(path.parent) != os.path.normpath(path.parent)
        ):
            left.append(name)
            continue
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            left.append(name)
            continue
        removed.append(name)
    return ProtectedChanges(removed=tuple(removed), left=tuple(left), changed=_outermost(changed))


def _inside(name: str, roots: Collection[str]) -> bool:
    """`name` is one of `roots` or below one: each folder on its way looked up, not each root."""
    if name in roots:
        return True
    cut = name.rfind("/")
    while cut > 0:
        if name[:cut] in roots:
            return True
        cut = name.rfind("/", 0, cut)
    return False


def _outermost(names: list[str]) -> tuple[str, ...]:
    """The names, less those inside another one of them: `.git` changed, not each file in it."""
    kept: list[str] = []
    for name in sorted(names):
        if not kept or not name.startswith(kept[-1] + "/"):
            kept.append(name)
    return tuple(kept)


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
    def for_runtime(cls, runtime: LayerRuntime) -> ProtectedPaths:
        """The table the layers share: the project, the audit log, checkpoints, config and policy files."""
        config = runtime.config
        return cls.for_root(
            runtime.workspace.root, [config.audit_log_path, config.checkpoint_dir, *runtime.server_files]
        )

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
            rule = _rule_for_parts(tuple(part.casefold() for part in parts))
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
