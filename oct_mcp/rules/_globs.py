"""gitignore-style globs over paths and over argument values, and the same globs as git pathspecs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

_NAMES_REMEMBERED: Final = 4_096
"""Names a `PathGlobs` keeps its answer for: about a megabyte at most, even of 255-byte names."""


@dataclass(frozen=True, slots=True)
class PathGlobs:
    """gitignore-style globs as two expressions: over one name at any depth (`*.pem`, `secrets/`),
    and over a path from the project root (`config/prod.yaml`, `/build`, `docs/**/*.md`).

    A path matches where a name of it matches the first, or it or a folder above it matches the
    second: what a folder's glob denies, it denies all inside. Written for speed: each path is
    tried against one expression per part, never a pattern at a time.
    """

    names: str | None
    """The alternation over one name, for the globs neither a plain name nor `*` and a suffix."""
    rooted: str | None
    """The alternation over a path from the root."""
    literal_names: frozenset[str] = frozenset()
    """Plain names (`secrets`, `.env`): a set lookup per part."""
    suffixes: tuple[str, ...] = ()
    """`*.pem` as `.pem`: a `str.endswith` per part."""
    _names: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _rooted: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _name_hits: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Each name's answer, once worked out: a tree's names repeat (`__init__.py`, `LC_MESSAGES`,
    `index.ts`), and a listing asks for every name it walks past. Emptied whole when full; calls
    sharing it from threads each see a right answer or none (each step is one dict operation)."""

    def __post_init__(self) -> None:
        # Most globs are plain names or suffixes, tried without a regular expression; the rest
        # are one expression over each part, and one match for the path or a folder above it.
        names = re.compile(self.names) if self.names is not None else None
        rooted = re.compile(f"(?:{self.rooted})(?:/|$)") if self.rooted is not None else None
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_rooted", rooted)

    def matches_any(self, paths: Iterable[str]) -> bool:
        return any(self.matches(path) for path in paths)

    def matches(self, path: str) -> bool:
        if self._rooted is not None and self._rooted.match(path):
            return True
        if not (self.literal_names or self.suffixes or self._names is not None):
            return False
        return any(self.matches_name(part) for part in path.split("/"))

    def matches_rooted(self, path: str) -> bool:
        """Whether a glob over a path from the root matches it or a folder above it."""
        return self._rooted is not None and self._rooted.match(path) is not None

    def matches_name(self, name: str) -> bool:
        """Whether a glob over one name (at any depth) matches `name`."""
        hit = self._name_hits.get(name)
        return self._remember(name) if hit is None else hit

    def names_hit(self, names: Sequence[str]) -> list[int]:
        """The indices of the `names` a glob over one name matches."""
        known = self._name_hits
        hits: list[int] = []
        for index, name in enumerate(names):
            hit = known.get(name)
            if hit or (hit is None and self._remember(name)):
                hits.append(index)
        return hits

    def _remember(self, name: str) -> bool:
        hit = name in self.literal_names or bool(self.suffixes and name.endswith(self.suffixes))
        if not hit and self._names is not None:
            hit = self._names.fullmatch(name) is not None
        if len(self._name_hits) >= _NAMES_REMEMBERED:
            self._name_hits.clear()
        self._name_hits[name] = hit
        return hit

    @classmethod
    def union(cls, globs: Iterable[PathGlobs]) -> PathGlobs:
        listed = list(globs)
        return cls(
            names=_alternation(g.names for g in listed),
            rooted=_alternation(g.rooted for g in listed),
            literal_names=frozenset().union(*(g.literal_names for g in listed)),
            suffixes=tuple(suffix for g in listed for suffix in g.suffixes),
        )


def _alternation(texts: Iterable[str | None]) -> str | None:
    kept = [text for text in texts if text is not None]
    return "|".join(f"(?:{text})" for text in kept) if kept else None


def path_globs(patterns: Iterable[str]) -> PathGlobs:
    """Compile gitignore-style globs.

    Raises:
        ValueError: A glob is empty, a negation (`!`: write a rule before this one instead), or
            climbs (`..`).
    """
    names: list[str] = []
    rooted: list[str] = []
    literal: set[str] = set()
    suffixes: list[str] = []
    for raw in patterns:
        glob = raw.strip().rstrip("/")
        if not glob or glob.startswith("!") or ".." in glob.split("/"):
            raise ValueError(raw)
        if "/" in glob:
            rooted.append(_glob_regex(glob.lstrip("/")))
        elif not any(char in glob for char in "*?[\\"):
            literal.add(glob)
        elif glob.startswith("*") and glob[1:] and not any(char in glob[1:] for char in "*?[\\"):
            suffixes.append(glob[1:])
        else:
            names.append(_glob_regex(glob))
    return PathGlobs(
        names=_alternation(names),
        rooted=_alternation(rooted),
        literal_names=frozenset(literal),
        suffixes=tuple(suffixes),
    )


def _glob_regex(glob: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:[^/]+/)*")
            index += 3
        elif glob.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[" and "]" in glob[index + 2 :]:
            close = glob.index("]", index + 2)
            body = glob[index + 1 : close]
            negated = body.startswith("!")
            body = re.escape(body[1:] if negated else body).replace(r"\-", "-")
            out.append(f"[{'^' if negated else ''}{body}]")
            index = close + 1
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def compiled_globs(patterns: Iterable[str], flags: int = 0) -> re.Pattern[str] | None:
    words = [re.escape(p).replace(r"\*", ".*").replace(r"\?", ".") for p in patterns]
    return re.compile("|".join(f"(?:{w})" for w in words), flags) if words else None


def value_globs(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """`When.fields`' globs (never none: the model refuses an empty list). A value may span lines
    (a commit message): `*` reaches across them."""
    compiled = compiled_globs(patterns, re.DOTALL)
    if compiled is None:
        raise ValueError("a fields condition has no glob")
    return compiled


def pointer_tokens(pointer: str) -> tuple[str, ...]:
    """RFC 6901: `/a~1b/c` is ("a/b", "c")."""
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:])


def value_matches(
    arguments: Mapping[str, Any] | None, tokens: tuple[str, ...], globs: re.Pattern[str]
) -> bool:
    """Whether the value at `tokens` matches; a value that is not there matches nothing."""
    value: Any = arguments
    for token in tokens:
        if isinstance(value, Mapping) and token in value:
            value = value[token]
        elif isinstance(value, list | tuple) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return False
    items = value if isinstance(value, list | tuple) else [value]
    return any(globs.fullmatch(item if isinstance(item, str) else json.dumps(item)) for item in items)


def git_exclusions(glob: str) -> tuple[str, str]:
    """A gitignore-style glob as two git exclusion pathspecs: the paths it names, and all inside them.

    git's `glob` magic matches as `PathGlobs` does (`*`, `?` and `[...]` stop at `/`, `**/` any
    folders), so a glob without `/` is tried at any depth (`**/NAME`), one with `/` from the root.
    Where the two read a glob apart, git is given more, never less: a `\\` is a plain character to
    the rules, so it is doubled; a `[` that closes nowhere is plain too, and escaped; a `**` inside a
    name crosses folders for the rules, so a rooted glob is cut to what comes before it and a `*`.
    """
    body = glob.strip().rstrip("/")
    rooted = "/" in body
    body = body.lstrip("/")
    if rooted:
        inside = [m.start() for m in re.finditer(r"\*\*", body) if not _whole_segment(body, m.start())]
        if inside:
            body = body[: inside[0]] + "*"
    escaped: list[str] = []
    for index, char in enumerate(body):
        if char == "\\":
            escaped.append("\\\\")
        elif char == "[" and "]" not in body[index + 2 :]:
            escaped.append("\\[")
        else:
            escaped.append(char)
    pattern = "".join(escaped) if rooted else "**/" + "".join(escaped)
    return (f":(exclude,glob){pattern}", f":(exclude,glob){pattern}/**")


def _whole_segment(body: str, at: int) -> bool:
    """Whether the `**` at `at` is a whole folder's name (`a/**/b`, `**/b`, `a/**`)."""
    return (at == 0 or body[at - 1] == "/") and (at + 2 == len(body) or body[at + 2] == "/")
