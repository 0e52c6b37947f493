"""Reading a project's named tasks from its task files, as data: nothing in them is run or evaluated.

Each reader takes a file's text and returns its tasks, or raises `TaskFileError` for a file it
cannot read. A noxfile is parsed with `ast` (never imported): a session whose name or pythons are
computed is listed by what its source says literally, or by its function's name. TOML is read by
`tomllib`, JSON by `json`, tox.ini by `configparser` without interpolation; a Makefile line by line.
"""

from __future__ import annotations

import ast
import configparser
import itertools
import json
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "EXPANSION_MAX",
    "NAME_MAX_LENGTH",
    "TASKS_MAX",
    "Runner",
    "Task",
    "TaskFileError",
    "expand_generative",
    "hatch_tasks",
    "is_task_name",
    "make_tasks",
    "nox_tasks",
    "npm_tasks",
    "pdm_tasks",
    "pyproject_tasks",
    "read_toml",
    "tox_ini_tasks",
    "tox_toml_tasks",
]

Runner = Literal["nox", "tox", "make", "script", "hatch", "pdm", "npm"]

NAME_MAX_LENGTH: Final = 128
TASKS_MAX: Final = 2_000
"""Tasks a reader returns at most, plus one to say there were more: a generated Makefile or a
generative tox env_list can name any number."""
# A task name becomes an argument of its runner: never an option (no leading `-`), no spaces, no
# `=` (make would read `a=b` as a variable), no `$` or `%` (make's variables and patterns).
_NAME: Final = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.:+@/-]*")
_TEXT_MAX: Final = 200
# A generative name (`py{39,310}-django{3,4}`) expands to at most this many names.
EXPANSION_MAX: Final = 256
# A longer generative name is not expanded: it could not expand to names short enough anyway.
_GENERATIVE_MAX_LENGTH: Final = 4 * NAME_MAX_LENGTH
_MAKE_SPECIAL_PREFIX: Final = "."
# Targets collected before the special ones are set aside: a bound on the memory a file can take.
_MAKE_TARGETS_MAX: Final = 4 * TASKS_MAX
_MAKE_ASSIGNMENT: Final = re.compile(
    r"^\s*(?:(?:export|override|private)\s+)*[^\s:#=]+\s*(?::{1,3}=|[?+!]?=)"
)
_MAKE_DIRECTIVES: Final = frozenset(
    {
        "include",
        "-include",
        "sinclude",
        "vpath",
        "ifeq",
        "ifneq",
        "ifdef",
        "ifndef",
        "else",
        "endif",
        "unexport",
    }
)
_MAKE_HELP: Final = re.compile(r"##\s*(.*)$")
_PDM_COMMAND_KEYS: Final = ("cmd", "shell", "call", "composite")


class TaskFileError(Exception):
    """A task file that cannot be read as its format; the message says where, never what it holds."""


@dataclass(frozen=True, slots=True)
class Task:
    """One named task: its runner, its name, and the argv that runs it from the file's folder."""

    runner: Runner
    name: str
    argv: tuple[str, ...]
    description: str | None = None
    command: str | None = None
    """What the task runs, as the file writes it (a script's command line, an entry point)."""


def is_task_name(name: object) -> bool:
    """A name that is safe as a runner's argument: plain characters, no leading `-`, bounded."""
    return isinstance(name, str) and len(name) <= NAME_MAX_LENGTH and _NAME.fullmatch(name) is not None


def _text(value: object) -> str | None:
    """A description or command for display: one line, control characters out, bounded."""
    if not isinstance(value, str):
        return None
    line = " ".join("".join(c if c.isprintable() else " " for c in value).split())
    if not line:
        return None
    return line if len(line) <= _TEXT_MAX else line[: _TEXT_MAX - 3] + "..."


# -- nox ------------------------------------------------------------------------------------------


def nox_tasks(source: str) -> list[Task]:
    """The sessions of a noxfile: functions decorated `@nox.session` or `@session(...)`.

    `name=` gives the session's name when it is a literal, else the function's name does;
    `python=` (or `py=`) is shown when it is a literal or a module-level literal list.

    Raises:
        TaskFileError: Not Python that parses.
    """
    try:
        tree = ast.parse(source, filename="noxfile.py")
    except SyntaxError as exc:
        raise TaskFileError(f"not valid Python (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError):
        raise TaskFileError("not Python that can be parsed (a null byte, or nested too deeply)") from None
    modules, decorators = _nox_names(tree)
    constants = _literal_constants(tree)
    tasks: list[Task] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            keywords = _nox_session_keywords(decorator, modules, decorators)
            if keywords is None:
                continue
            name = _literal(keywords.get("name"), constants)
            name = name if isinstance(name, str) else node.name
            pythons = _literal(keywords.get("python", keywords.get("py")), constants)
            docstring = ast.get_docstring(node)
            description = (
                _text(docstring.strip().splitlines()[0]) if docstring and docstring.strip() else None
            )
            shown = _pythons(pythons)
            if shown:
                description = f"{description} (python {shown})" if description else f"python {shown}"
            tasks.append(Task("nox", name, ("nox", "-s", name), description))
            break
    return tasks


def _nox_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names `nox` is imported as, and the names its `session` decorator is imported as."""
    modules: set[str] = set()
    decorators: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name for alias in node.names if alias.name == "nox")
        elif isinstance(node, ast.ImportFrom) and node.module == "nox":
            decorators.update(alias.asname or alias.name for alias in node.names if alias.name == "session")
    return modules, decorators


def _nox_session_keywords(
    decorator: ast.expr, modules: set[str], decorators: set[str]
) -> dict[str, ast.expr] | None:
    """The keywords of a `@nox.session(...)` decorator ({} for a bare one); None for any other."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call is not None else decorator
    is_session = (
        isinstance(target, ast.Attribute)
        and target.attr == "session"
        and isinstance(target.value, ast.Name)
        and target.value.id in modules
    ) or (isinstance(target, ast.Name) and target.id in decorators)
    if not is_session:
        return None
    if call is None:
        return {}
    return {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg is not None}


def _literal_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level `NAME = <literal>` assignments: what a decorator's `python=PYTHONS` names."""
    constants: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value: ast.expr | None = node.value
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            value, name = node.value, node.target.id
        else:
            continue
        literal = _literal(value, {})
        if literal is not None:
            constants[name] = literal
    return constants


def _literal(node: ast.expr | None, constants: Mapping[str, Any]) -> Any:
    """A string, or a list or tuple of strings, written literally or as a constant's name; else None."""
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bool):
        return node.value
    if isinstance(node, ast.List | ast.Tuple) and all(
        isinstance(item, ast.Constant) and isinstance(item.value, str) for item in node.elts
    ):
        return [item.value for item in node.elts if isinstance(item, ast.Constant)]
    return None


def _pythons(value: Any) -> str | None:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list) and value:
        return _text(", ".join(value))
    return None


# -- tox ------------------------------------------------------------------------------------------


def tox_ini_tasks(source: str) -> list[Task]:
    """The environments of a tox.ini: `[tox] env_list` (or `envlist`) and `[testenv:NAME]` sections.

    Generative names (`py{311,312}-lint`, `py3{11-13}`) are expanded.

    Raises:
        TaskFileError: Not an INI file configparser reads.
    """
    parser = configparser.ConfigParser(interpolation=None, strict=False, default_section="\x00")
    try:
        parser.read_string(source, source="tox.ini")
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None)
        raise TaskFileError("not a valid INI file" + (f" (line {line})" if line else "")) from None
    listed: list[str] = []
    if parser.has_section("tox"):
        for key in ("env_list", "envlist"):
            if parser.has_option("tox", key):
                listed += _env_list(parser.get("tox", key))
                break
    descriptions: dict[str, str | None] = {}
    for section in parser.sections():
        if section.startswith("testenv:") and len(descriptions) <= TASKS_MAX:
            described = _text(parser.get(section, "description", fallback=None))
            for name in expand_generative(section[len("testenv:") :].strip()):
                descriptions.setdefault(name, described)
    return _tox_tasks([*listed, *descriptions], descriptions)


def tox_toml_tasks(table: Mapping[str, Any]) -> list[Task]:
    """The environments of tox's TOML configuration: `env_list` and the `env` tables.

    `table` is tox.toml's whole document or pyproject's `[tool.tox]`; a `legacy_tox_ini` string in
    it is read as a tox.ini.

    Raises:
        TaskFileError: The legacy INI text cannot be read.
    """
    legacy = table.get("legacy_tox_ini")
    if isinstance(legacy, str):
        return tox_ini_tasks(legacy)
    listed: list[str] = []
    for item in _strings(table.get("env_list")):
        if len(listed) > TASKS_MAX:
            break
        listed += expand_generative(item)
    envs = table.get("env")
    descriptions: dict[str, str | None] = {}
    if isinstance(envs, Mapping):
        for name, settings in envs.items():
            described = _text(settings.get("description")) if isinstance(settings, Mapping) else None
            descriptions.setdefault(str(name), described)
    return _tox_tasks([*listed, *descriptions], descriptions)


def _tox_tasks(names: Iterable[str], descriptions: Mapping[str, str | None]) -> list[Task]:
    unique = itertools.islice(dict.fromkeys(names), TASKS_MAX + 1)
    return [Task("tox", name, ("tox", "-e", name), descriptions.get(name)) for name in unique]


def _env_list(value: str) -> list[str]:
    """tox's env_list value: names separated by commas or lines, each perhaps generative."""
    names: list[str] = []
    for item in _split_outside_braces(value):
        item = item.split("#", 1)[0].strip()
        if item:
            names += expand_generative(item)
        if len(names) > TASKS_MAX:
            break
    return names


def _split_outside_braces(value: str) -> Iterator[str]:
    depth, start = 0, 0
    for index, char in enumerate(value):
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(depth - 1, 0)
        elif char in ",\n" and depth == 0:
            yield value[start:index]
            start = index + 1
    yield value[start:]


def expand_generative(name: str) -> list[str]:
    """A tox generative name's expansions: `py{39,310}-x` is py39-x and py310-x; `py3{10-12}` a range.

    A name with unbalanced or nested braces is returned as it is (and then fails `is_task_name`);
    at most EXPANSION_MAX names come back.
    """
    if len(name) > _GENERATIVE_MAX_LENGTH:
        return [name]
    parts = re.split(r"(\{[^{}]*\})", name)
    if any("{" in part or "}" in part for part in parts[::2]):
        return [name]
    choices: list[list[str]] = []
    for index, part in enumerate(parts):
        if index % 2:
            choices.append(_brace_choices(part[1:-1]))
        else:
            choices.append([part])
    names: list[str] = []
    for combination in itertools.product(*choices):
        names.append("".join(combination))
        if len(names) >= EXPANSION_MAX:
            break
    return names


def _brace_choices(inside: str) -> list[str]:
    choices: list[str] = []
    for item in inside.split(","):
        item = item.strip()
        bounds = re.fullmatch(r"(\d{1,4})-(\d{1,4})", item)
        if bounds is not None:
            low, high = int(bounds.group(1)), int(bounds.group(2))
            choices += [str(n) for n in range(low, min(high, low + EXPANSION_MAX) + 1)]
        else:
            choices.append(item)
    return choices


# -- make -----------------------------------------------------------------------------------------


def make_tasks(source: str) -> list[Task]:
    """The targets of a Makefile's rule lines, in order; `## text` after a rule is its description.

    Left out: pattern rules (`%`), names with variables (`$`), targets starting with `.` unless
    declared `.PHONY` (the special targets, suffix rules, hidden files), target-specific variable
    lines, and everything inside `define` ... `endef`. Included files are not read.
    """
    logical = _logical_lines(source)
    phony: set[str] = set()
    found: dict[str, str | None] = {}
    defining = 0
    for line in logical:
        if line.startswith("\t"):
            continue  # a recipe line
        stripped = line.strip()
        word = stripped.split(None, 1)[0] if stripped else ""
        if word == "define" or (word in ("export", "override") and stripped.split()[1:2] == ["define"]):
            defining += 1
            continue
        if word == "endef":
            defining = max(defining - 1, 0)
            continue
        if defining or not stripped or stripped.startswith("#") or word in _MAKE_DIRECTIVES:
            continue
        if _MAKE_ASSIGNMENT.match(line):
            continue
        # Found with str.find, not a regular expression: a rule's target list and the spaces
        # around it overlap in any pattern that splits them, and a long line would backtrack.
        colon = line.find(":")
        head = line[:colon]
        if colon < 0 or "#" in head or "=" in head:
            continue
        rest = line[colon + 1 :].removeprefix(":")
        if rest.startswith("=") or _MAKE_ASSIGNMENT.match(rest):
            continue  # `a := b` written with spaces, or `target: VAR = value`
        targets = head.split()
        if not targets:
            continue
        if targets == [".PHONY"]:
            phony.update(rest.split(";", 1)[0].split("#", 1)[0].split())
            continue
        helped = _MAKE_HELP.search(rest)
        description = _text(helped.group(1)) if helped else None
        for target in targets:
            if "%" in target or "$" in target:
                continue
            if target in found:
                found[target] = found[target] or description
            elif len(found) <= _MAKE_TARGETS_MAX:
                found[target] = description
    tasks = (
        Task("make", target, ("make", target), description)
        for target, description in found.items()
        if not target.startswith(_MAKE_SPECIAL_PREFIX) or target in phony
    )
    return list(itertools.islice(tasks, TASKS_MAX + 1))


def _logical_lines(source: str) -> list[str]:
    """The file's lines with backslash continuations joined, as make reads them."""
    lines: list[str] = []
    pending: list[str] = []
    for raw in source.splitlines():
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        lines.append(" ".join(pending))
        pending = []
    if pending:
        lines.append(" ".join(pending))
    return lines


# -- pyproject.toml, hatch.toml, package.json ------------------------------------------------------


def read_toml(source: str) -> dict[str, Any]:
    """A TOML document.

    Raises:
        TaskFileError: Not valid TOML.
    """
    try:
        return tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        raise TaskFileError("not valid TOML" + (f" (line {found.group(1)})" if found else "")) from None
    except (RecursionError, MemoryError):
        raise TaskFileError("not TOML that can be read (nested too deeply)") from None


def pyproject_tasks(document: Mapping[str, Any]) -> list[Task]:
    """`[project.scripts]` and `[tool.poetry.scripts]`: console scripts, each run by its name."""
    tasks: list[Task] = []
    project = _table(document, "project")
    poetry = _table(_table(document, "tool"), "poetry")
    for scripts in (_table(project, "scripts"), _table(poetry, "scripts")):
        for name, target in scripts.items():
            entry = target.get("callable", target.get("reference")) if isinstance(target, Mapping) else target
            tasks.append(Task("script", str(name), (str(name),), "console script", _text(entry)))
    return tasks


def hatch_tasks(envs: Mapping[str, Any]) -> list[Task]:
    """Hatch's environment scripts (pyproject's `[tool.hatch.envs]`, or hatch.toml's `[envs]`).

    A script of the `default` environment runs as `hatch run NAME`, another's as `hatch run ENV:NAME`.
    """
    tasks: list[Task] = []
    for env, settings in envs.items():
        if not isinstance(settings, Mapping):
            continue
        for name, command in _table(settings, "scripts").items():
            qualified = str(name) if env == "default" else f"{env}:{name}"
            shown = " && ".join(_strings(command)) if isinstance(command, list) else command
            tasks.append(Task("hatch", qualified, ("hatch", "run", qualified), None, _text(shown)))
    return tasks


def pdm_tasks(document: Mapping[str, Any]) -> list[Task]:
    """`[tool.pdm.scripts]`: each run as `pdm run NAME`; `_` (options shared by every script) is none."""
    tasks: list[Task] = []
    for name, script in _table(_table(_table(document, "tool"), "pdm"), "scripts").items():
        if name == "_":
            continue
        description = None
        command: object = script
        if isinstance(script, Mapping):
            description = _text(script.get("help"))
            command = next((script[key] for key in _PDM_COMMAND_KEYS if key in script), None)
        if isinstance(command, list):
            command = " ".join(_strings(command))
        tasks.append(Task("pdm", str(name), ("pdm", "run", str(name)), description, _text(command)))
    return tasks


def npm_tasks(source: str) -> list[Task]:
    """`package.json`'s `scripts`: each run as `npm run NAME`.

    Raises:
        TaskFileError: Not a JSON object.
    """
    try:
        document = json.loads(source)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"not valid JSON (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError):
        raise TaskFileError("not JSON that can be read (nested too deeply, or a number too long)") from None
    if not isinstance(document, dict):
        raise TaskFileError("the top level is not a JSON object")
    return [
        Task("npm", str(name), ("npm", "run", str(name)), None, _text(command))
        for name, command in _table(document, "scripts").items()
        if isinstance(command, str)
    ]


def _table(document: object, key: str) -> Mapping[str, Any]:
    value = document.get(key) if isinstance(document, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
