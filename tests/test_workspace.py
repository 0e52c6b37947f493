"""contain() and Workspace.open_regular_file: every refusal rule, the accepted paths, and what opens."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import given

import oct_mcp.workspace
from oct_mcp.errors import NotFoundError, PathRefusedError
from oct_mcp.testing.strategies import path_texts
from oct_mcp.workspace import Workspace, contain, read_at_most

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


def make_tree(base: Path) -> Path:
    """A project root with files, symlinks that stay inside, and symlinks that lead out.

    Returns:
        The resolved root; `base / "outside"` holds the secret the links point at.
    """
    base = base.resolve()
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours\n")
    root = base / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("ANSWER = 42\n")
    (root / "README.md").write_text("# Demo\n")
    (root / "inside_link.txt").symlink_to("README.md")
    (root / "inside_dir_link").symlink_to("src")
    (root / "out_dir_link").symlink_to(outside)
    (root / "out_file_link").symlink_to(outside / "secret.txt")
    # A chain: the first link stays inside, the second leads out.
    (root / "chain_b").symlink_to("../outside/secret.txt")
    (root / "chain_a").symlink_to("chain_b")
    (root / "loop").symlink_to("loop")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    return root


TREE_NAMES = (
    "outside",
    "secret.txt",
    "root",
    "src",
    "pkg",
    "core.py",
    "README.md",
    "inside_link.txt",
    "inside_dir_link",
    "out_dir_link",
    "out_file_link",
    "chain_a",
    "chain_b",
    "loop",
    "loop_a",
    "loop_b",
    # Stand-ins for the absolute root and outside folder, which exist only once the fixture ran.
    "{root}",
    "{outside}",
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One shared tree, never written to by the tests that use it."""
    return make_tree(tmp_path_factory.mktemp("tree"))


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A fresh tree per test, for tests that add files (FIFOs) or swap them."""
    return Workspace(make_tree(tmp_path))


def refusal(path: str, root: Path) -> PathRefusedError:
    with pytest.raises(PathRefusedError) as caught:
        contain(path, root)
    return caught.value


def refuses_or_contains(path: str, root: Path) -> bool:
    """contain()'s whole contract: it raises PathRefusedError, or answers the root or a path inside it."""
    try:
        resolved = contain(path, root)
    except PathRefusedError:
        return True
    return resolved == root or resolved.is_relative_to(root)


def read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@contextmanager
def fails_after(seconds: float) -> Iterator[None]:
    """Turn a blocking system call into a test failure instead of a hung run."""

    def expire(signum: int, frame: FrameType | None) -> None:
        # Not TimeoutError: that is an OSError, which the code under test translates.
        pytest.fail(f"the call blocked for {seconds} seconds")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# contain: refusals, one rule per test.


def test_contain_refuses_an_empty_path(root: Path) -> None:
    assert refusal("", root).code == "path_refused"


def test_contain_refuses_a_path_over_4096_characters(root: Path) -> None:
    assert refusal("a" * 4_097, root).code == "path_refused"


def test_contain_accepts_a_path_of_exactly_4096_characters(root: Path) -> None:
    assert contain("a" * 4_096, root) == root / ("a" * 4_096)


def test_contain_refuses_a_path_with_nul(root: Path) -> None:
    assert refusal("README.md\x00.txt", root).code == "path_refused"


@pytest.mark.parametrize("char", ["\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9b"])
def test_contain_refuses_a_path_with_a_control_character(root: Path, char: str) -> None:
    assert refusal(f"src/{char}core.py", root).code == "path_refused"


@pytest.mark.parametrize("path", ["-", "-rf", "--help", "-name.txt"])
def test_contain_refuses_a_path_that_starts_with_a_dash(root: Path, path: str) -> None:
    assert refusal(path, root).code == "path_refused"


def test_contain_accepts_a_dash_name_written_as_dot_slash(root: Path) -> None:
    assert contain("./-name.txt", root) == root / "-name.txt"


def test_contain_refuses_a_windows_drive_with_a_backslash(root: Path) -> None:
    assert refusal("C:\\x", root).code == "path_refused"


def test_contain_refuses_a_windows_drive_relative_path(root: Path) -> None:
    assert refusal("C:x", root).code == "path_refused"


def test_contain_refuses_a_unc_path(root: Path) -> None:
    assert refusal("\\\\server\\share", root).code == "path_refused"


def test_contain_refuses_a_path_starting_with_two_slashes(root: Path) -> None:
    assert refusal("//x", root).code == "path_refused"


@pytest.mark.parametrize("path", ["/", "/etc/passwd", "OUTSIDE_SECRET"])
def test_contain_refuses_an_absolute_path_outside_the_root(root: Path, path: str) -> None:
    path = path.replace("OUTSIDE_SECRET", str(root.parent / "outside" / "secret.txt"))

    assert refusal(path, root).code == "path_refused"


def test_contain_refuses_an_absolute_sibling_whose_name_starts_with_the_root_name(root: Path) -> None:
    assert refusal(f"{root}-evil/x", root).code == "path_refused"


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside", "src/pkg/../../../x"])
def test_contain_refuses_dot_dot_that_climbs_out(root: Path, path: str) -> None:
    assert refusal(path, root).code == "path_refused"


@pytest.mark.parametrize("path", ["out_dir_link", "out_dir_link/secret.txt", "out_dir_link/new.txt"])
def test_contain_refuses_a_symlink_to_a_folder_outside(root: Path, path: str) -> None:
    assert refusal(path, root).code == "path_refused"


def test_contain_refuses_a_symlink_to_a_file_outside(root: Path) -> None:
    assert refusal("out_file_link", root).code == "path_refused"


def test_contain_refuses_a_symlink_chain_that_ends_outside(root: Path) -> None:
    assert refusal("chain_a", root).code == "path_refused"


def test_contain_judges_dot_dot_after_a_symlink_where_the_symlink_leads(root: Path) -> None:
    # Lexically 'out_dir_link/..' is the root; the kernel would take it to the folder above 'outside'.
    assert refusal("out_dir_link/..", root).code == "path_refused"


@pytest.mark.parametrize("path", ["loop", "loop_a", "loop/x"])
def test_contain_refuses_or_contains_a_symlink_loop(root: Path, path: str) -> None:
    # Either answer keeps the contract; any other exception reaches the client as an internal error.
    assert refuses_or_contains(path, root)


def test_contain_refuses_or_contains_a_lone_surrogate(root: Path) -> None:
    # U+D800 is legal in JSON text but cannot be encoded as a file name.
    assert refuses_or_contains("src/\ud800.py", root)


# contain: accepted paths.


def test_contain_accepts_the_root_itself_as_dot(root: Path) -> None:
    assert contain(".", root) == root


def test_contain_accepts_a_nested_relative_path(root: Path) -> None:
    assert contain("src/pkg/core.py", root) == root / "src" / "pkg" / "core.py"


def test_contain_accepts_an_absolute_path_inside_the_root(root: Path) -> None:
    assert contain(str(root / "src" / "pkg"), root) == root / "src" / "pkg"


def test_contain_accepts_the_root_as_an_absolute_path(root: Path) -> None:
    assert contain(str(root), root) == root


def test_contain_accepts_dot_dot_that_stays_inside(root: Path) -> None:
    assert contain("src/../README.md", root) == root / "README.md"


def test_contain_resolves_a_symlink_to_a_file_inside(root: Path) -> None:
    assert contain("inside_link.txt", root) == root / "README.md"


def test_contain_resolves_a_symlink_to_a_folder_inside(root: Path) -> None:
    assert contain("inside_dir_link/pkg/core.py", root) == root / "src" / "pkg" / "core.py"


def test_contain_accepts_a_path_that_does_not_exist_yet(root: Path) -> None:
    assert contain("not/yet/there.txt", root) == root / "not" / "yet" / "there.txt"


def test_contain_accepts_unicode_and_a_backslash_inside_a_name(root: Path) -> None:
    assert contain("名前/a\\b.txt", root) == root / "名前" / "a\\b.txt"


@given(path=path_texts(TREE_NAMES))
def test_contain_refuses_or_answers_a_path_inside_the_root(root: Path, path: str) -> None:
    path = path.replace("{root}", str(root)).replace("{outside}", str(root.parent / "outside"))

    assert refuses_or_contains(path, root)


# Workspace.open_regular_file.


def test_open_regular_file_reads_a_regular_file(workspace: Workspace) -> None:
    assert read_all(workspace.open_regular_file("src/pkg/core.py")) == b"ANSWER = 42\n"


def test_open_regular_file_returns_a_blocking_descriptor(workspace: Workspace) -> None:
    fd = workspace.open_regular_file("README.md")
    try:
        assert os.get_blocking(fd) is True
    finally:
        os.close(fd)


@pytest.mark.parametrize("path", [".", "src", "inside_dir_link"])
def test_open_regular_file_refuses_a_directory(workspace: Workspace, path: str) -> None:
    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file(path)

    assert caught.value.code == "path_refused"


def test_open_regular_file_refuses_a_fifo_without_blocking(workspace: Workspace) -> None:
    os.mkfifo(workspace.root / "pipe")

    with fails_after(5), pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file("pipe")

    assert caught.value.code == "path_refused"


@linux_only
@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir])
def test_open_regular_file_closes_the_descriptor_it_refuses(
    workspace: Workspace, make: Callable[[Path], None]
) -> None:
    make(workspace.root / "not_a_file")
    before = open_descriptors()

    with fails_after(5), pytest.raises(PathRefusedError):
        workspace.open_regular_file("not_a_file")

    assert open_descriptors() == before


def test_open_regular_file_reads_the_target_of_a_final_symlink_that_stays_inside(
    workspace: Workspace,
) -> None:
    # contain() resolves the symlink first, so O_NOFOLLOW meets the target, a regular file.
    assert read_all(workspace.open_regular_file("inside_link.txt")) == b"# Demo\n"


@pytest.mark.parametrize(
    "path", ["out_file_link", "chain_a", "out_dir_link/secret.txt", "../outside/secret.txt"]
)
def test_open_regular_file_refuses_a_path_that_leads_outside(workspace: Workspace, path: str) -> None:
    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file(path)

    assert caught.value.code == "path_refused"


@pytest.mark.parametrize("path", ["missing.txt", "missing/file.txt"])
def test_open_regular_file_answers_a_missing_file_with_not_found(workspace: Workspace, path: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        workspace.open_regular_file(path)

    assert caught.value.code == "not_found"


def test_open_regular_file_answers_a_dangling_symlink_inside_with_not_found(workspace: Workspace) -> None:
    (workspace.root / "dangling").symlink_to("gone.txt")

    with pytest.raises(NotFoundError) as caught:
        workspace.open_regular_file("dangling")

    assert caught.value.code == "not_found"


def test_open_regular_file_refuses_a_path_through_a_file(workspace: Workspace) -> None:
    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file("README.md/x")

    assert caught.value.code == "path_refused"


def test_open_regular_file_refuses_a_symlink_loop(workspace: Workspace) -> None:
    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file("loop")

    assert caught.value.code == "path_refused"


def swap_after_contain(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """Run `swap` between containment and the open, as a racing process would."""
    real_contain = oct_mcp.workspace.contain_text

    def contain_then_swap(path: str, top: str) -> str:
        resolved = real_contain(path, top)
        swap()
        return resolved

    monkeypatch.setattr(oct_mcp.workspace, "contain_text", contain_then_swap)


def test_open_regular_file_refuses_a_file_swapped_for_a_symlink_after_contain(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace.root / "README.md"

    def swap() -> None:
        target.unlink()
        target.symlink_to(workspace.root.parent / "outside" / "secret.txt")

    swap_after_contain(monkeypatch, swap)

    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file("README.md")

    assert caught.value.code == "path_refused"


@linux_only
def test_open_regular_file_refuses_a_folder_swapped_for_a_symlink_after_contain(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = workspace.root / "docs"
    folder.mkdir()
    (folder / "secret.txt").write_text("inside\n")

    def swap() -> None:
        (folder / "secret.txt").unlink()
        folder.rmdir()
        folder.symlink_to(workspace.root.parent / "outside")

    swap_after_contain(monkeypatch, swap)

    with pytest.raises(PathRefusedError) as caught:
        workspace.open_regular_file("docs/secret.txt")

    assert caught.value.code == "path_refused"


# read_at_most: what the tools read files with.


@pytest.mark.parametrize(
    ("size", "size_hint", "limit", "expected"),
    [
        (550, 550, 1_000, 550),  # the common case: the whole file
        (0, 0, 1_000, 0),
        (1_000, 1_000, 1_000, 1_000),  # exactly the limit is not over it
        (5_000, 5_000, 1_000, 1_001),  # over: one byte past the limit, no more
        (5_000, 10, 1_000, 1_001),  # grew after fstat: still stopped one past the limit
        (700, 10, 1_000, 700),  # grew, but stays under the limit: read whole
        (10, 700, 1_000, 10),  # shrank after fstat
        (200_000, 10, 150_000, 150_001),  # grew by more than a chunk: read on in pieces, then stopped
        (140_000, 10, 150_000, 140_000),
    ],
)
def test_read_at_most_reads_whole_files_and_stops_one_byte_past_the_limit(
    tmp_path: Path, size: int, size_hint: int, limit: int, expected: int
) -> None:
    content = bytes(index % 251 for index in range(size))
    (tmp_path / "data").write_bytes(content)
    fd = os.open(tmp_path / "data", os.O_RDONLY)
    try:
        data = read_at_most(fd, limit, size_hint)
    finally:
        os.close(fd)

    assert data == content[:expected]
