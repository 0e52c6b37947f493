"""Path anonymisation: the project root becomes `<project>`, the home `~`, the user name `<user>`,
and the server's own installation and scratch folders their tokens (`<venv>`, `<python>`, `<scratch>`)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from ahocorasick_rs import BytesAhoCorasick, Implementation

__all__ = [
    "PROJECT",
    "PYTHON",
    "SCRATCH",
    "TEMP",
    "USER",
    "VENV",
    "HostPath",
    "anonymise_paths",
    "names_host_paths",
    "server_paths",
]

PROJECT: Final = "<project>"
USER: Final = "<user>"
VENV: Final = "<venv>"
PYTHON: Final = "<python>"
SCRATCH: Final = "<scratch>"
TEMP: Final = "<tmp>"

# Folders that say nothing of this machine's user or setup: a path that is one of them stays.
_SYSTEM_FOLDERS: Final = frozenset(
    {
        "/",
        "/usr",
        "/usr/local",
        "/opt",
        "/bin",
        "/lib",
        "/tmp",  # noqa: S108 - a name compared with, no file made there
        "/var/tmp",  # noqa: S108 - a name compared with, no file made there
        "/private/tmp",
        "/private/var/tmp",
    }
)


@dataclass(frozen=True, slots=True)
class HostPath:
    """A folder of the host that output must not show, and the token that stands for it."""

    path: str
    token: str
    name_prefix: bool = False
    """`path` ends in the start of a folder name (`/tmp/oct-run-`): the rest of the name goes too."""


def server_paths(temp_folder: str, scratch_prefix: str) -> tuple[HostPath, ...]:
    """The server's own folders: its venv, its interpreter's installation, the runs' scratch folders.

    A tool's error output shows them (a traceback through the server's venv, HOME in a scratch
    folder); they say where and as whom the server runs. System folders (`/usr`) are kept.

    Args:
        temp_folder: Where the sandbox makes each run's scratch folder (`tempfile.gettempdir()`).
        scratch_prefix: How those folders' names start.
    """
    found: dict[str, HostPath] = {}
    for token, folders in (
        (VENV, (sys.prefix, sys.exec_prefix)),
        (PYTHON, (sys.base_prefix, sys.base_exec_prefix)),
        (TEMP, (temp_folder,)),
    ):
        for folder in folders:
            for form in (folder, os.path.realpath(folder)):
                form = form.rstrip("/")
                if form and form not in _SYSTEM_FOLDERS and form not in found:
                    found[form] = HostPath(form, token)
    for form in dict.fromkeys((temp_folder, os.path.realpath(temp_folder))):
        found[f"{form.rstrip('/')}/{scratch_prefix}"] = HostPath(
            f"{form.rstrip('/')}/{scratch_prefix}", SCRATCH, name_prefix=True
        )
    return tuple(found.values())


# A path ends where a character that cannot continue a file name follows (or the text ends):
# `/home/dev` is in `/home/dev/x` and `"/home/dev"`, not in `/home/dev2`.
_PATH_END: Final = r"(?![\w.-])"
# Directories whose children are named after users (Linux, macOS, mail spools), and pytest's
# temporary root, which is named after the user too.
_PER_USER_PARENTS: Final = (
    "/home/",
    "/Users/",
    "/var/mail/",
    "/var/spool/mail/",
    "/var/spool/cron/crontabs/",
)
_PER_USER_PREFIXES: Final = ("pytest-of-",)
_ENV_NAMES: Final = ("USER", "LOGNAME", "USERNAME")


def _distinctive(user: str) -> bool:
    # A name with a capital, digit or punctuation (`j.smith`, `dev42`) is no English word, so it can
    # be replaced wherever it stands; `dev`, `root`, `mark` would also hit prose and paths such as
    # `/dev/null`, so those are replaced only where the text says it is a user.
    return any(not ("a" <= char <= "z") for char in user)


@dataclass(frozen=True, slots=True)
class _Matchers:
    """The patterns for one host, and an automaton of their literals."""

    patterns: tuple[tuple[str, re.Pattern[str], str], ...]
    """(literal, pattern, token): the pattern can only match where its literal occurs in the text."""
    literals: BytesAhoCorasick | None
    """Every literal, UTF-8: one pass says whether any is in a text, where a `in` each cost 5 to
    11 us for 20 KiB of a listing's paths (measured)."""

    def named_in(self, text: str) -> bool:
        if self.literals is None:
            return False
        data = text.encode("utf-8", "surrogatepass")
        return bool(self.literals.find_matches_as_indexes(data))


@lru_cache(maxsize=32)
def _matchers(project_root: str, home: str, user: str, others: tuple[HostPath, ...]) -> _Matchers:
    patterns = _patterns(project_root, home, user, others)
    literals = [literal.encode("utf-8", "surrogatepass") for literal, _pattern, _token in patterns]
    # The DFA: twice the NFA's speed for a few literals, little memory.
    automaton = BytesAhoCorasick(literals, implementation=Implementation.DFA) if literals else None
    return _Matchers(patterns, automaton)


def _patterns(
    project_root: str, home: str, user: str, others: tuple[HostPath, ...]
) -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(literal, pattern, token), in the order they are to be applied."""
    patterns: list[tuple[str, re.Pattern[str], str]] = []
    roots = [HostPath(root.rstrip("/"), token) for root, token in ((project_root, PROJECT), (home, "~"))]
    # The longer first: a project under the home is `<project>`, not `~/project`; a venv in the
    # project is `<venv>`.
    for root in sorted((*roots, *others), key=lambda root: len(root.path), reverse=True):
        if root.path:
            name_rest = r"[\w.-]*" if root.name_prefix else ""
            pattern = re.compile(re.escape(root.path) + name_rest + _PATH_END)
            patterns.append((root.path, pattern, root.token))
    if user:
        name = re.escape(user)
        # One fixed-width look-behind per marker: Python's look-behinds cannot alternate widths.
        markers = (*_PER_USER_PARENTS, *_PER_USER_PREFIXES, "~", *(f"{env}=" for env in _ENV_NAMES))
        after = "|".join(f"(?<={re.escape(marker)})" for marker in markers)
        quoted = "|".join(f"(?<={env}=\")|(?<={env}=')" for env in _ENV_NAMES)
        forms = [
            rf"(?:{after}){name}{_PATH_END}",
            rf"(?:{quoted}){name}(?=[\"'])",
            rf"(?<![\w.+-]){name}(?=@[A-Za-z0-9])",
        ]
        if _distinctive(user):
            forms.append(rf"(?<![\w.-]){name}(?![\w-]|\.\w)")
        patterns.append((user, re.compile("|".join(forms)), USER))
    return tuple(patterns)


def anonymise_paths(
    text: str, *, project_root: str, home: str, user: str, others: tuple[HostPath, ...] = ()
) -> str:
    """Replace the project root with `<project>`, the home with `~`, and the user name with `<user>`.

    The roots are replaced wherever they stand as a whole path (not as the prefix of a longer
    name: `/home/dev2` is left alone for the home `/home/dev`). The user name is replaced where
    the text says it is a user: a path component under a per-user directory (`/home/NAME`,
    `/Users/NAME`, `/var/mail/NAME`, pytest's `pytest-of-NAME`), `~NAME`, `NAME@host`, and
    `USER=NAME` (also `LOGNAME`, `USERNAME`). A name that is no plain lower-case word (`j.smith`,
    `Dev42`) is replaced wherever it stands alone; a plain word (`dev`, `root`) is not, elsewhere,
    since it is also prose and other paths (`/dev/null`).

    Args:
        text: Tool output, an error message, an audit record.
        project_root: The absolute project root; empty to leave roots alone.
        home: The user's home directory; empty to leave it alone.
        user: The login name; empty to leave names alone.
        others: More folders to replace, each with its token (the server's own: `server_paths`).

    Returns:
        The anonymised text; text with none of them is returned unchanged.
    """
    matchers = _matchers(project_root, home, user, others)
    # Measured: the look-behind alternations cost ~45 us per KiB of text, and most tool output
    # names neither the root nor the user: one pass over it for all the literals first.
    if not matchers.named_in(text):
        return text
    for literal, pattern, token in matchers.patterns:
        if literal in text:
            text = pattern.sub(token, text)
    return text


def names_host_paths(
    text: str, *, project_root: str, home: str, user: str, others: tuple[HostPath, ...] = ()
) -> bool:
    """Whether `anonymise_paths` could change `text`: it holds a root, a folder or the user name.

    False for texts joined is False for each of them: a structured result's strings are checked
    in one call, not one each.
    """
    return _matchers(project_root, home, user, others).named_in(text)
