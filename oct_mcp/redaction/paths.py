"""Path anonymisation: the project root becomes `<project>`, the home `~`, the user name `<user>`."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

__all__ = ["PROJECT", "USER", "anonymise_paths"]

PROJECT: Final = "<project>"
USER: Final = "<user>"

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


@lru_cache(maxsize=32)
def _patterns(project_root: str, home: str, user: str) -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(literal, pattern, token): the pattern can only match where its literal occurs in the text."""
    patterns: list[tuple[str, re.Pattern[str], str]] = []
    roots = [(root.rstrip("/"), token) for root, token in ((project_root, PROJECT), (home, "~"))]
    # The longer first: a project under the home is `<project>`, not `~/project`.
    for root, token in sorted(roots, key=lambda pair: len(pair[0]), reverse=True):
        if root:
            patterns.append((root, re.compile(re.escape(root) + _PATH_END), token))
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


def anonymise_paths(text: str, *, project_root: str, home: str, user: str) -> str:
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

    Returns:
        The anonymised text; text with none of them is returned unchanged.
    """
    for literal, pattern, token in _patterns(project_root, home, user):
        # Measured: the look-behind alternations cost ~45 us per KiB of text; `in` costs ~0.1 us,
        # and most tool output names neither the root nor the user.
        if literal in text:
            text = pattern.sub(token, text)
    return text
