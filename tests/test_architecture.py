"""The import rules of the design: layers stand alone, only server, transports and embed speak MCP."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import oct_mcp
from oct_mcp.tools import default_catalog

PACKAGE = Path(oct_mcp.__file__).parent
SDK_MODULES = ("mcp", "mcp_types", "fastmcp")


def _imports(path: Path) -> Iterator[str]:
    module_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module_parts[: len(module_parts) - node.level]
                base = ".".join((*parent, base) if base else parent)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _is_under(name: str, *modules: str) -> bool:
    return any(name == m or name.startswith(f"{m}.") for m in modules)


LAYER_FILES = sorted(p for p in (PACKAGE / "middleware").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("path", LAYER_FILES, ids=lambda p: p.stem)
def test_a_layer_imports_no_sdk_no_server_no_tools_and_no_other_layer(path: Path) -> None:
    other_layers = [f"oct_mcp.middleware.{p.stem}" for p in LAYER_FILES if p != path]
    forbidden = (
        *SDK_MODULES,
        "oct_mcp.server",
        "oct_mcp.transports",
        "oct_mcp.embed",
        "oct_mcp.tools",
        "oct_mcp.cli",
        *other_layers,
    )

    assert [name for name in _imports(path) if _is_under(name, *forbidden)] == []


# server.py, the transports and the embed package are the modules allowed to speak MCP.
NOT_MCP_FILES = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if p.relative_to(PACKAGE).parts[0] not in ("server.py", "transports", "embed")
)


@pytest.mark.parametrize("path", NOT_MCP_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_server_transports_and_embed_import_the_sdk(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, *SDK_MODULES)] == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "tools").rglob("*.py")), ids=lambda p: p.stem)
def test_tools_do_not_import_the_middleware(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, "oct_mcp.middleware")] == []


def test_the_public_api_exports_exactly_its_all() -> None:
    # Submodules become attributes once imported anywhere; they are not part of the API list.
    public = {
        name
        for name in dir(oct_mcp)
        if not name.startswith("_") and not inspect.ismodule(getattr(oct_mcp, name))
    }

    assert public == set(oct_mcp.__all__) - {"__version__"}


def test_each_exported_name_is_the_object_its_module_defines() -> None:
    for name in oct_mcp.__all__:
        value = getattr(oct_mcp, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith("oct_mcp."):
            assert getattr(importlib.import_module(home), name) is value
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        _ = oct_mcp.Nothing  # type: ignore[attr-defined]


def test_the_seed_names_import_from_the_package() -> None:
    from oct_mcp import McpConfig, SafetyDecision, SafetyGate, load_config
    from oct_mcp.spec import Risk

    config = load_config(PACKAGE / "no-such-config.json")
    read_tool = next(spec for spec in default_catalog().values() if spec.risk is Risk.READ)
    decision = SafetyGate(config).check(read_tool.name, read_tool, {})

    assert isinstance(config, McpConfig)
    assert decision == SafetyDecision(
        proceed=True, requires_confirmation=False, dry_run=False, reason=decision.reason
    )


def _runtime_imports(path: Path, package: Path = PACKAGE, *, type_checking: bool = False) -> Iterator[str]:
    """What a module imports when it runs, a function's imports included; `if TYPE_CHECKING:` left out
    unless `type_checking` (what the type checker follows too).

    A name imported from a package is the submodule when there is one (`from oct_mcp.middleware
    import audit` imports `oct_mcp.middleware.audit`), the package itself otherwise.
    """
    module_parts = path.relative_to(package.parent).with_suffix("").parts
    if module_parts[-1] == "__init__":
        module_parts = (*module_parts[:-1], "_")
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module_parts[: len(module_parts) - node.level]
                base = ".".join((*parent, base) if base else parent)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if _module_file(submodule, package) is not None else base


def _module_file(name: str, package: Path = PACKAGE) -> Path | None:
    parts = name.split(".")
    if parts[0] != package.name:
        return None
    base = package.parent.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top(module: str) -> str:
    """The package's own module or subpackage a module belongs to: `oct_mcp.backends.runner` is in
    `oct_mcp.backends`."""
    return ".".join(module.split(".")[:2])


def import_cycle(
    package: Path, *, by_package: bool = False, allowed: frozenset[tuple[str, str]] = frozenset()
) -> list[str]:
    """One cycle of the package's import graph, as the modules along it; [] when acyclic.

    Every import counts: a function's, and one made for the type checker only (`if TYPE_CHECKING:`),
    which is a cycle too for whoever reads the code, and for the checker.

    With `by_package`, each subpackage is one node (a module imports its subpackage's siblings
    freely), and an edge in `allowed` is left out.
    """
    node = _top if by_package else (lambda module: module)
    graph: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        source = node(_module_name(path, package))
        targets = set(graph.get(source, []))
        for name in _runtime_imports(path, package, type_checking=True):
            found = _module_file(name, package)
            if found is None:
                continue
            target = node(_module_name(found, package))
            if target != source and target != package.name and (source, target) not in allowed:
                targets.add(target)
        graph[source] = sorted(targets)
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, [])
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [(start, iter(graph[start]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(graph[child])))
                path.append(child)
                on_path.add(child)
    return []


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycle(PACKAGE) == []


def test_no_two_parts_of_the_package_import_each_other() -> None:
    assert import_cycle(PACKAGE, by_package=True) == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "transports").rglob("*.py")), ids=lambda p: p.stem)
def test_the_transports_do_not_import_the_server_facade(path: Path) -> None:
    # server.py re-exports the transports' binding and stdio for users; the edge runs one way.
    assert [name for name in _imports(path) if _is_under(name, "oct_mcp.server")] == []


def test_the_backends_import_nothing_above_them() -> None:
    above = ("oct_mcp.spec", "oct_mcp.tools", "oct_mcp.execution", "oct_mcp.middleware", "oct_mcp.server")
    imported = {
        name
        for path in sorted((PACKAGE / "backends").rglob("*.py"))
        for name in _runtime_imports(path)
        if _is_under(name, *above)
    }

    assert imported == set()


def test_the_package_cycle_check_finds_a_cycle_between_subpackages(tmp_path: Path) -> None:
    package = tmp_path / "oct_mcp"
    (package / "backends").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text("from oct_mcp.backends.runner import run\n")
    (package / "backends" / "__init__.py").write_text("")
    (package / "backends" / "runner.py").write_text("from oct_mcp.backends.fake import Fake\n")
    (package / "backends" / "fake.py").write_text("from oct_mcp.spec import RunResult\n")

    # No cycle between modules: spec -> runner -> fake -> spec is one, found at either level.
    assert import_cycle(package, by_package=True) == ["oct_mcp.backends", "oct_mcp.spec", "oct_mcp.backends"]
    assert (
        import_cycle(package, by_package=True, allowed=frozenset({("oct_mcp.backends", "oct_mcp.spec")}))
        == []
    )


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "oct_mcp"
    (package / "middleware").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "chain.py").write_text("def build():\n    from oct_mcp.middleware import REGISTRY\n")
    (package / "middleware" / "__init__.py").write_text("from oct_mcp.chain import build\n")

    assert import_cycle(package) == ["oct_mcp.chain", "oct_mcp.middleware", "oct_mcp.chain"]


def test_the_cycle_check_counts_an_import_made_for_the_type_checker_only(tmp_path: Path) -> None:
    package = tmp_path / "oct_mcp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "types.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from oct_mcp.spec import ToolSpec\n"
    )
    (package / "spec.py").write_text("from oct_mcp.types import Risk\n")

    assert import_cycle(package) == ["oct_mcp.spec", "oct_mcp.types", "oct_mcp.spec"]


_ERRORS_A_LAYER_RAISES: tuple[str, ...] = (
    "ConfigError",
    "ExecutionError",
    "InvalidArgumentsError",
    "OctError",
    "PathRefusedError",
    "RefusedError",
)


def test_the_types_module_imports_nothing_of_the_package_at_run_time_but_its_errors_and_base_types() -> None:
    imported = list(_runtime_imports(PACKAGE / "types.py"))
    below = [*_runtime_imports(PACKAGE / "errors.py"), *_runtime_imports(PACKAGE / "base_types.py")]

    assert {name for name in imported if _is_under(name, "oct_mcp")} <= {"oct_mcp.errors"} | {
        f"oct_mcp.errors.{name}" for name in _ERRORS_A_LAYER_RAISES
    } | {"oct_mcp.base_types"}
    assert [name for name in below if _is_under(name, "oct_mcp")] == []


def test_a_layer_finds_what_it_raises_and_reads_in_the_types_module() -> None:
    import oct_mcp.errors
    import oct_mcp.spec
    import oct_mcp.types

    assert oct_mcp.types.RefusedError is oct_mcp.errors.RefusedError
    assert oct_mcp.types.Risk is oct_mcp.spec.Risk is oct_mcp.Risk
    assert {"RefusedError", "OctError", "Risk"} <= set(oct_mcp.types.__all__)


@pytest.mark.parametrize("path", LAYER_FILES, ids=lambda p: p.stem)
def test_a_layer_does_not_import_the_chain_or_the_registry(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, "oct_mcp.chain", "oct_mcp.registry")] == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "embed").rglob("*.py")), ids=lambda p: p.stem)
def test_embedding_does_not_import_the_stdio_server(path: Path) -> None:
    assert [name for name in _imports(path) if _is_under(name, "oct_mcp.server")] == []


# Where the package may change files, and why; everything else (every tool above all) proposes
# changes and `oct_mcp.execution` applies them. A new writer must be named here with its reason.
_WRITERS: dict[str, str] = {
    "oct_mcp/execution/": "the one applier of the project's changes",
    "oct_mcp/audit/": "the audit log and its seal, the server's own files outside any tool's reach",
    "oct_mcp/backends/": "the confinement's own acts for a run, never in the project: the masked copies "
    "of secret files a run is shown, in its scratch folder; what the seccomp supervisor does for a "
    "confined run (a chmod in its scratch folder, the run's shared-memory folder)",
    "oct_mcp/embed/pins.py": "the folder of an embedded server's pin file, in the server's own state "
    "folder (the file itself through atomic_write)",
    "oct_mcp/atomic_write.py": "files replaced whole: the user's config files that `oct-mcp install` and "
    "`oct-mcp token` write, an embedded server's pin file",
    "oct_mcp/install/": "`oct-mcp install HOST` writes the host's MCP config files the user named, "
    "each backed up first",
}
_WRITING_CALLS = frozenset(
    {
        "os.replace", "os.rename", "os.renames", "os.unlink", "os.remove", "os.rmdir", "os.removedirs",
        "os.mkdir", "os.makedirs", "os.fchmod", "os.chmod", "os.lchmod", "os.chown", "os.symlink",
        "os.link", "os.truncate", "os.ftruncate", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.move",
        "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.copymode",
    }
)  # fmt: skip
# Method names that only a path (or a file) has: a call of one of them is a write, whatever its receiver.
_WRITING_METHODS = frozenset(
    {"write_text", "write_bytes", "touch", "mkdir", "rmdir", "unlink", "symlink_to", "hardlink_to", "chmod"}
)
_WRITING_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _writes(path: Path, top: Path = PACKAGE.parent) -> list[str]:
    """The lines of a module that change files (a writing call, an open for writing), in line order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        flags = {_dotted(arg).rsplit(".", 1)[-1] for arg in ast.walk(node) if isinstance(arg, ast.Attribute)}
        mode = next(
            (
                arg.value
                for arg in node.args[1:2]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ),
            "",
        )
        if (
            name in _WRITING_CALLS
            or (isinstance(node.func, ast.Attribute) and node.func.attr in _WRITING_METHODS)
            or (name == "os.open" and flags & _WRITING_FLAGS)
            or (name in {"open", "os.fdopen"} and set(mode) & set("wax+"))
        ):
            found.append((node.lineno, f"{path.relative_to(top)}:{node.lineno}: {name}"))
    return [line for _number, line in sorted(found)]


def test_only_the_applier_and_the_named_writers_change_files() -> None:
    writers = tuple(_WRITERS)
    found = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.relative_to(PACKAGE.parent).as_posix().startswith(writers)
        for line in _writes(path)
    ]

    assert found == []


def test_the_write_check_finds_each_way_of_writing(tmp_path: Path) -> None:
    module = tmp_path / "writer.py"
    module.write_text(
        "import os, shutil\n"
        "os.replace('a', 'b')\n"
        "shutil.rmtree('x')\n"
        "target.write_bytes(b'')\n"
        "fd = os.open('a', os.O_WRONLY | os.O_CREAT)\n"
        "open('a', 'w')\n"
        "fd = os.open('a', os.O_RDONLY)\n"
        "open('a')\n"
        "text.replace('a', 'b')\n"
    )

    found = [line.rsplit(": ", 1)[-1] for line in _writes(module, tmp_path)]

    assert found == ["os.replace", "shutil.rmtree", "target.write_bytes", "os.open", "open"]


MODULE_LINES_MAX = 600
# The modules past the bound, each with why it stands whole; any other fails. A module that needs
# banner sections wants to be several files (the git, python, rules and install packages were).
_LONG_MODULES: dict[str, str] = {
    "oct_mcp/redaction/detectors.py": "a data table: one entry per secret format",
}


def test_no_module_is_longer_than_the_bound_but_those_named_with_why() -> None:
    top = PACKAGE.parent
    long = {
        path.relative_to(top).as_posix()
        for path in PACKAGE.rglob("*.py")
        if len(path.read_text().splitlines()) > MODULE_LINES_MAX
    }

    assert long == set(_LONG_MODULES)
