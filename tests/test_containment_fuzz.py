"""Path fuzzing through the whole chain over a tree of hostile symlinks: zero escapes."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from oct_mcp.app import App, CallFailure, build_app, run_call
from oct_mcp.errors import PathRefusedError
from oct_mcp.testing.strategies import path_texts
from oct_mcp.types import ClientInfo, ToolResult
from oct_mcp.workspace import contain

pytestmark = pytest.mark.e2e

# CI runs 10,000 examples; a developer's run, a tenth of that.
EXAMPLES = 10_000 if os.environ.get("CI") else 1_000
SECRET = "outside the project"  # noqa: S105 - text to look for, not a credential
REFUSAL_CODES = {"path_refused", "invalid_arguments", "not_found", "binary_file", "file_too_large"}


@dataclass(frozen=True)
class HostileTree:
    app: App
    root: Path
    names: tuple[str, ...]


@pytest.fixture(scope="module")
def hostile_tree() -> Iterator[HostileTree]:
    """A project whose links lead to a sibling, to /, in loops and in chains, beside honest files."""
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp).resolve()
        root = base / "project"
        sibling = base / "project-evil"
        (root / "src").mkdir(parents=True)
        sibling.mkdir()
        (sibling / "secret.txt").write_text(SECRET)
        (base / "secret.txt").write_text(SECRET)
        (root / "src" / "code.py").write_text("print('inside')\n")
        (root / "README.md").write_text("# inside\n")
        links = {
            "to_sibling": sibling,
            "to_sibling_file": sibling / "secret.txt",
            "to_parent": base,
            "to_root_fs": Path("/"),
            "to_etc_passwd": Path("/etc/passwd"),
            "loop": root / "loop",
            "loop_a": root / "loop_b",
            "loop_b": root / "loop_a",
            "chain_1": root / "chain_2",
            "chain_2": root / "chain_3",
            "chain_3": sibling,
            "inside_link": root / "src",
            "relative_out": Path("../project-evil"),
        }
        for name, target in links.items():
            (root / name).symlink_to(target)
        (root / "src" / "deep_out").symlink_to(Path("../../project-evil/secret.txt"))
        config = base / "config.json"
        app = build_app(root, config_path=config, environ={})
        names = (
            *links,
            "src",
            "src/code.py",
            "src/deep_out",
            "README.md",
            str(root),
            str(sibling),
            str(base),
        )
        yield HostileTree(app=app, root=root, names=names)


_CLIENT_NUMBERS = itertools.count()


def _call(tree: HostileTree, tool: str, arguments: dict[str, object]) -> ToolResult | CallFailure:
    # A client per call: the fuzzer makes thousands of calls a minute, and the rate limit is not on trial.
    client = ClientInfo(client_id=f"fuzz-{next(_CLIENT_NUMBERS)}", transport="memory")
    outcome = anyio.run(run_call, tree.app, tool, arguments, client)
    assert not isinstance(outcome, CallFailure) or outcome.code in REFUSAL_CODES, outcome
    assert not isinstance(outcome, CallFailure) or outcome.code != "internal_error"
    return outcome  # type: ignore[return-value]


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(data=path_texts(("to_sibling", "to_parent", "loop", "chain_1", "src", "relative_out", "to_root_fs")))
def test_no_path_read_through_the_chain_ever_leaves_the_project(data: str, hostile_tree: HostileTree) -> None:
    outcome = _call(hostile_tree, "oct_read_file", {"path": data})

    if isinstance(outcome, ToolResult):
        assert SECRET not in outcome.text
        assert "root:" not in outcome.text
        assert outcome.structured is not None
        opened = (hostile_tree.root / str(outcome.structured["path"])).resolve()
        assert opened.is_relative_to(hostile_tree.root)


@settings(max_examples=EXAMPLES // 10, suppress_health_check=[HealthCheck.too_slow])
@given(data=path_texts(("to_sibling", "to_parent", "loop", "chain_1", "src", "relative_out", "to_root_fs")))
def test_no_folder_listed_through_the_chain_ever_leaves_the_project(
    data: str, hostile_tree: HostileTree
) -> None:
    outcome = _call(hostile_tree, "oct_list_files", {"path": data, "max_results": 50})

    if isinstance(outcome, ToolResult):
        assert outcome.structured is not None
        for listed in outcome.structured["files"]:
            assert not Path(listed).is_absolute()
            assert ".." not in Path(listed).parts
            assert (hostile_tree.root / listed).parent.resolve().is_relative_to(hostile_tree.root)


@pytest.mark.parametrize(
    "path",
    [
        "to_sibling/secret.txt",
        "to_sibling_file",
        "to_parent/secret.txt",
        "to_root_fs/etc/passwd",
        "to_etc_passwd",
        "chain_1/secret.txt",
        "relative_out/secret.txt",
        "src/deep_out",
        "loop",
        "loop_a/x",
        "inside_link/../../secret.txt",
    ],
)
def test_each_hostile_link_is_refused(path: str, hostile_tree: HostileTree) -> None:
    outcome = _call(hostile_tree, "oct_read_file", {"path": path})

    assert isinstance(outcome, CallFailure)
    assert outcome.code == "path_refused"


def test_a_link_that_stays_inside_is_followed(hostile_tree: HostileTree) -> None:
    outcome = _call(hostile_tree, "oct_read_file", {"path": "inside_link/code.py"})

    assert isinstance(outcome, ToolResult)
    assert outcome.text == "print('inside')\n"


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(data=path_texts(("to_sibling", "to_parent", "loop", "chain_1", "src", "inside_link", "relative_out")))
def test_containment_resolves_every_path_as_realpath_does(data: str, hostile_tree: HostileTree) -> None:
    # contain() skips realpath where no symlink, '..' or missing component is on the way below the
    # root; whatever it returns must be what realpath gives, and what it refuses must be refused.
    root = hostile_tree.root
    absolute = data if os.path.isabs(data) else os.path.join(root, data)
    try:
        contained = contain(data, root)
    except PathRefusedError:
        # Refused for its text, or because it leaves the root as written or as resolved.
        assert (
            _refused_by_syntax(data)
            or not _inside(os.path.normpath(absolute), root)
            or not _inside(os.path.realpath(absolute), root)
        )
    else:
        assert str(contained) == os.path.realpath(absolute)


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(f"{root}{os.sep}")


def _refused_by_syntax(data: str) -> bool:
    """Refused under any root: empty, overlong, control characters, a leading '-', a drive."""
    try:
        contain(data, Path("/"))
    except PathRefusedError:
        return True
    return False


def test_the_plain_path_and_a_link_on_the_way_resolve_alike(hostile_tree: HostileTree) -> None:
    root = hostile_tree.root
    assert contain("src/code.py", root) == root / "src" / "code.py"
    assert contain("inside_link/code.py", root) == root / "src" / "code.py"
    assert contain(f"{root}/src//./code.py", root) == root / "src" / "code.py"
    assert contain("src/new_file.py", root) == root / "src" / "new_file.py"
    with pytest.raises(PathRefusedError):
        contain("to_sibling/secret.txt", root)
