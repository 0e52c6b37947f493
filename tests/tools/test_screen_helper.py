"""oct_search's screening helper process: the same results with it, without it, and when it fails or lies."""

from __future__ import annotations

import errno
import os
import random
import signal
import site
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from clocks import TickingClock

from oct_mcp import file_screen
from oct_mcp.file_screen import MATCH, NO_MATCH, SKIPPED, ScreenQuery, screen_file_at
from oct_mcp.tools import screen_helper as helper_module
from oct_mcp.tools.screen_helper import ScreenHelper
from oct_mcp.tools.search import SEARCH_LIMITS, SearchLimits, SearchParams, search
from oct_mcp.workspace import Workspace

WARM_SECONDS = 30.0


class CountingHelper(ScreenHelper):
    """The real helper, counting the requests it is sent."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.sent = 0

    def send(
        self, query: ScreenQuery, folders: list[int], names: list[tuple[int, str]], deadline: float
    ) -> int | None:
        request = super().send(query, folders, names, deadline)
        self.sent += request is not None
        return request


@pytest.fixture
def helper(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingHelper]:
    # Small chunks: the test trees' few hundred files cross many chunk boundaries, and reach the helper.
    started = CountingHelper(chunk_files=8)
    assert started.warm(WARM_SECONDS)
    yield started
    started.stop()


@pytest.fixture
def tree(tmp_path: Path) -> Workspace:
    """A project of 300 files over nested folders: matches here and there, binary and empty files,
    an ignored folder, a symlink and a FIFO."""
    root = (tmp_path / "project").resolve()
    root.mkdir()
    for n in range(300):
        folder = root / f"pkg{n % 4}" / f"sub{n % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"line {i} of file {n}\n" for i in range(12))
        if n % 7 == 0:
            body += f"Needle in {n}\nneedle again\n"
        if n % 50 == 1:
            body = "needle\0binary\n"
        if n % 61 == 2:
            body = ""
        (folder / f"m{n:03}.txt").write_text(body)
    (root / ".gitignore").write_text("ignored/\n")
    (root / "ignored").mkdir()
    (root / "ignored" / "x.txt").write_text("needle ignored\n")
    (root / "pkg0" / "link.txt").symlink_to(root / "pkg1" / "sub0" / "m001.txt")
    os.mkfifo(root / "pkg2" / "fifo.txt")
    return Workspace(root)


def every_page(
    workspace: Workspace, helper: ScreenHelper | None, limits: SearchLimits = SEARCH_LIMITS, **arguments: Any
) -> list[Any]:
    """Every page of a search by cursor, each page's structured result."""
    pages: list[Any] = []
    cursor = None
    while True:
        result = search(
            workspace, SearchParams(cursor=cursor, **arguments), screen_helper=helper, limits=limits
        )
        assert result.structured is not None
        pages.append(result.structured)
        cursor = result.structured.get("next_cursor")
        if cursor is None:
            return pages


QUERIES: list[dict[str, Any]] = [
    {"pattern": "needle"},
    {"pattern": "needle", "case_sensitive": False},
    {"pattern": r"^needle\b|in \d+$", "regex": True},
    {"pattern": "needle", "mode": "files"},
    {"pattern": "needle", "mode": "count", "max_results": 7},
    {"pattern": "needle", "before": 2, "after": 1, "max_results": 9},
    {"pattern": "line 3 ", "max_results": 40},
    {"pattern": "not anywhere"},
    {"pattern": "needle", "path": "pkg1", "glob": "sub*/**/*.txt"},
]


@pytest.mark.parametrize("arguments", QUERIES)
def test_search_gives_the_same_pages_with_the_helper_as_without(
    tree: Workspace, helper: CountingHelper, arguments: dict[str, Any]
) -> None:
    alone = every_page(tree, None, **arguments)

    assert every_page(tree, helper, **arguments) == alone
    assert helper.sent > 0


def test_search_counts_binary_oversized_and_unopenable_files_as_skipped_with_the_helper(
    tree: Workspace, helper: CountingHelper
) -> None:
    limits = SearchLimits(file_max_bytes=400)
    (tree.root / "pkg3" / "big.txt").write_text("needle\n" * 100)

    with_helper = search(
        tree, SearchParams(pattern="needle", mode="count"), screen_helper=helper, limits=limits
    )
    alone = search(tree, SearchParams(pattern="needle", mode="count"), screen_helper=None, limits=limits)

    assert with_helper.structured == alone.structured
    assert alone.structured is not None
    # Six binary files and the oversized one (the FIFO and the symlink are no files to search).
    assert alone.structured["files_skipped"] == 7
    assert helper.sent > 0


def test_search_goes_on_alone_with_the_same_results_when_the_helper_dies(tree: Workspace) -> None:
    class DyingHelper(CountingHelper):
        def send(
            self, query: ScreenQuery, folders: list[int], names: list[tuple[int, str]], deadline: float
        ) -> int | None:
            if self.sent == 2 and self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
            return super().send(query, folders, names, deadline)

    dying = DyingHelper()
    assert dying.warm(WARM_SECONDS)
    try:
        pages = every_page(tree, dying, pattern="line 1 ", max_results=500)
    finally:
        dying.stop()

    assert pages == every_page(tree, None, pattern="line 1 ", max_results=500)
    assert dying.sent >= 2


def _scripted_helper(
    script: str, reply_timeout: float = 30.0, factory: Callable[..., ScreenHelper] = ScreenHelper
) -> ScreenHelper:
    """A helper process that runs `script` (given `connection` and `control`, its sockets) instead of
    the screen."""
    prelude = (
        "import socket, sys\n"
        "connection = socket.socket(fileno=int(sys.argv[1]))\n"
        "control = socket.socket(fileno=int(sys.argv[2]))\n"
    )

    def argv_for(socket_fd: int, control_fd: int) -> Sequence[str]:
        return [sys.executable, "-I", "-c", prelude + script, str(socket_fd), str(control_fd)]

    return factory(argv_for=argv_for, reply_timeout=reply_timeout)


def _late_helper(
    delay: float,
    reply_timeout: float = 30.0,
    factory: Callable[..., ScreenHelper] = ScreenHelper,
    answered: Path | None = None,
) -> ScreenHelper:
    """The real screen, each reply sent `delay` seconds late (a helper busy on slow files); with
    `answered`, a byte is added to that file after each reply is sent."""
    tally = f"        open({str(answered)!r}, 'ab').write(b'.')\n" if answered is not None else ""
    return _scripted_helper(
        "import time\n"
        "sys.argv = sys.argv[1:]\n"
        f"sys.path.insert(0, {os.path.dirname(file_screen.__file__)!r})\n"
        "import file_screen\n"
        "class Late(socket.socket):\n"
        "    def sendall(self, data, *rest):\n"
        f"        if len(data) > 1: time.sleep({delay})\n"
        "        super().sendall(data, *rest)\n"
        f"{tally}"
        "file_screen.serve(Late(fileno=connection.detach()), control)\n",
        reply_timeout=reply_timeout,
        factory=factory,
    )


def test_a_helper_that_says_every_file_matches_shows_nothing_that_does_not(tree: Workspace) -> None:
    lying = _scripted_helper(
        "connection.sendall(b'R')\n"
        "while True:\n"
        "    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 64)\n"
        "    if not message: break\n"
        "    request = message[:4]\n"
        "    files = message[19 + int.from_bytes(message[9:11], 'big'):].split(b'\\0')\n"
        "    connection.sendall(request + b'm' * len(files))\n"
    )
    assert lying.warm(WARM_SECONDS)
    try:
        pages = every_page(tree, lying, pattern="needle", mode="count")
    finally:
        lying.stop()

    assert pages == every_page(tree, None, pattern="needle", mode="count")


def test_search_goes_on_alone_when_the_helper_stops_answering(tree: Workspace) -> None:
    silent = _scripted_helper("connection.sendall(b'R')\nimport time\ntime.sleep(600)\n", reply_timeout=0.3)
    assert silent.warm(WARM_SECONDS)
    try:
        pages = every_page(tree, silent, pattern="needle")
        assert silent.ready() is False  # stopped: a helper this slow is not waited for again
    finally:
        silent.stop()

    assert pages == every_page(tree, None, pattern="needle")


def test_a_helper_that_cannot_start_is_tried_a_bounded_number_of_times(tree: Workspace) -> None:
    starts: list[int] = []

    def argv_for(socket_fd: int, control_fd: int) -> Sequence[str]:
        starts.append(socket_fd)
        return [sys.executable, "-I", "-c", "raise SystemExit(3)"]

    broken = ScreenHelper(argv_for=argv_for)
    for _ in range(helper_module.STARTS_MAX + 2):
        assert broken.warm(WARM_SECONDS) is False

    assert len(starts) == helper_module.STARTS_MAX
    assert every_page(tree, broken, pattern="needle") == every_page(tree, None, pattern="needle")


def test_a_search_that_finds_the_helper_busy_screens_alone(tree: Workspace, helper: CountingHelper) -> None:
    assert helper.acquire()
    try:
        pages = every_page(tree, helper, pattern="needle")
    finally:
        helper.release()

    assert pages == every_page(tree, None, pattern="needle")
    assert helper.sent == 0


def test_searches_at_once_share_the_helper_and_each_gets_its_own_results(
    tree: Workspace, helper: CountingHelper
) -> None:
    expected = {
        pattern: every_page(tree, None, pattern=pattern) for pattern in ("needle", "line 2 ", "of file 1")
    }
    results: dict[str, list[Any]] = {}

    def run(pattern: str) -> None:
        results[pattern] = every_page(tree, helper, pattern=pattern)

    threads = [threading.Thread(target=run, args=(pattern,)) for pattern in expected]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert results == expected


def test_the_helper_runs_isolated_from_the_server_environment_folder_and_streams(
    helper: CountingHelper, tmp_path: Path
) -> None:
    pid = helper.pid
    assert pid is not None
    proc = Path("/proc") / str(pid)

    assert (proc / "environ").read_bytes() in (
        b"",
        f"LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH')}\0".encode(),
    )
    assert os.readlink(proc / "cwd") == "/"
    assert (proc / "cmdline").read_bytes().split(b"\0")[1] == b"-I"
    for stream in ("0", "1", "2"):
        assert os.readlink(proc / "fd" / stream) == os.devnull
    assert os.getsid(pid) == pid


def test_no_helper_runs_when_its_code_lies_inside_the_project(helper: CountingHelper) -> None:
    # The package's own source as the project, as when oct-mcp is developed with itself.
    workspace = Workspace(Path(file_screen.__file__).resolve().parent)

    pages = every_page(workspace, helper, pattern="def serve(connection")

    assert helper.sent == 0
    assert pages == every_page(workspace, None, pattern="def serve(connection")
    assert [m["path"] for m in pages[0]["matches"]] == ["file_screen.py"]
    assert "from inside the project" in helper_module.helper_status(workspace.root)


def test_the_helper_never_imports_from_the_folder_it_is_started_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "re2.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    started = ScreenHelper()
    try:
        assert started.warm(WARM_SECONDS)
    finally:
        started.stop()

    assert not marker.exists()


def test_screening_refuses_symlinks_fifos_and_folders_and_reads_regular_files(tmp_path: Path) -> None:
    (tmp_path / "text.txt").write_text("a needle\n")
    (tmp_path / "other.txt").write_text("nothing\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "text.txt")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        verdicts = {
            name: screen_file_at(folder, name, b"needle", 1_000)[0]
            for name in ("text.txt", "other.txt", "link.txt", "fifo", "folder", "gone")
        }
    finally:
        os.close(folder)

    assert verdicts == {
        "text.txt": MATCH,
        "other.txt": NO_MATCH,
        "link.txt": SKIPPED,
        "fifo": SKIPPED,
        "folder": SKIPPED,
        "gone": SKIPPED,
    }


def test_the_helper_loop_answers_each_request_with_a_verdict_a_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\nFOUND here\n")
    (tmp_path / "b.txt").write_text("nothing\n")
    (tmp_path / "c.bin").write_bytes(b"FOUND\0")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    control, their_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = threading.Thread(target=file_screen.serve, args=(theirs, their_control))
    server.start()
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    query = ScreenQuery("found", regex=False, case_sensitive=False, file_max_bytes=1_000)
    names = file_screen.encode_names([(0, "a.txt"), (0, "b.txt"), (0, "c.bin"), (0, "missing")])
    try:
        assert ours.recv(16) == file_screen.READY
        socket.send_fds(ours, [query.encode(7, time.monotonic() + 30) + names], [folder])
        answered = ours.recv(1_024)
        socket.send_fds(ours, [query.encode(8, time.monotonic() - 1) + names], [folder])
        late = ours.recv(1_024)
        control.send(file_screen.CANCEL.pack(10))
        socket.send_fds(ours, [query.encode(9, time.monotonic() + 30) + names], [folder])
        cancelled = ours.recv(1_024)
    finally:
        os.close(folder)
        ours.close()
        control.close()
        server.join(timeout=30)
        theirs.close()
        their_control.close()

    assert answered == file_screen.REPLY_HEADER.pack(7) + bytes((MATCH, NO_MATCH, SKIPPED, SKIPPED))
    # Past its search's deadline, or cancelled: no file screened.
    assert late == file_screen.REPLY_HEADER.pack(8) + bytes((file_screen.UNREACHED,)) * 4
    assert cancelled == file_screen.REPLY_HEADER.pack(9) + bytes((file_screen.UNREACHED,)) * 4
    assert not server.is_alive()


def test_files_of_a_folder_that_cannot_be_held_are_skipped_not_a_failed_search(
    tree: Workspace, helper: CountingHelper, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_descriptor_left(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(helper_module.os, "dup", no_descriptor_left)

    result = search(tree, SearchParams(pattern="needle"), screen_helper=helper)

    assert result.structured is not None
    # The 300 files and the .gitignore.
    assert (result.structured["files_searched"], result.structured["files_skipped"]) == (0, 301)
    assert result.structured["matches"] == []
    assert helper.sent == 0


def test_a_search_that_stops_early_leaves_the_helper_working_for_the_next(
    tree: Workspace, helper: CountingHelper
) -> None:
    # A page of 100 lines stops after about 100 files, with the chunks after them still at the helper.
    first = search(tree, SearchParams(pattern="line 0 of", max_results=100), screen_helper=helper)
    pid, sent = helper.pid, helper.sent

    pages = every_page(tree, helper, pattern="needle")

    assert first.structured is not None
    assert first.structured["truncated"] is True
    assert pages == every_page(tree, None, pattern="needle")
    assert (helper.pid, helper.sent > sent) == (pid, True)


# A regex on which RE2 leaves its DFA: about a second a MiB of text without the Q.
SLOW_PATTERN = r"([a-j]|[k-t]).{90}Q(x|y)"


def _linked_files(root: Path, body: bytes, count: int, stem: str = "f") -> None:
    """`count` hard links to one file: as many files to search, one file's worth of disk."""
    first = root / f"{stem}000.txt"
    first.write_bytes(body)
    for n in range(1, count):
        os.link(first, root / f"{stem}{n:03}.txt")


def _random_text(size: int) -> bytes:
    choose = random.Random(1).choice  # noqa: S311 - repeatable test text, no secret
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 "
    return bytes(choose(alphabet) for _ in range(size))


@pytest.mark.parametrize("with_helper", [False, True])
def test_a_search_stops_at_its_time_limit_a_file_at_a_time(tmp_path: Path, with_helper: bool) -> None:
    _slow_then_small(tmp_path / "tree")
    # The search's clock passes its second at the 50th reading, however loaded the machine; the
    # helper is given the second left on the machine's clock when it is sent a chunk.
    limits = SearchLimits(time_seconds=1.0, clock=TickingClock(0.02))
    # Small chunks: the helper gets some of the slow files before the time is up.
    started = CountingHelper(chunk_files=8) if with_helper else None
    if started is not None:
        assert started.warm(WARM_SECONDS)
    try:
        result = search(
            Workspace((tmp_path / "tree").resolve()),
            SearchParams(pattern=SLOW_PATTERN, regex=True),
            screen_helper=started,
            limits=limits,
        )
        # The helper outlived the slow search: a search that runs out of time does not use it up.
        assert started is None or (started.ready(), started.sent > 0) == (True, True)
    finally:
        if started is not None:
            started.stop()

    assert result.structured is not None
    assert result.structured["stopped_early"] is True
    # Read here between files, the clock stopped the search within 50 of them; the helper, a slow file
    # a tenth of a second, screened at most about ten in its second: not the 320.
    assert result.structured["files_searched"] < 64 + 50


def test_a_page_that_fills_in_its_first_file_searches_only_that_file(
    tmp_path: Path, helper: CountingHelper
) -> None:
    root = tmp_path.resolve()
    _linked_files(root, b"Qx" + _random_text(128 * 1024) + b"Qx\n", 160)

    result = search(
        Workspace(root),
        SearchParams(pattern=SLOW_PATTERN + "|^Qx", regex=True, max_results=1),
        screen_helper=helper,
    )

    assert result.structured is not None
    # The second file's first match is what says more follow, as before the helper.
    assert (result.structured["files_searched"], len(result.structured["matches"])) == (2, 1)


def test_a_helper_that_is_behind_does_not_make_the_server_hold_the_files_ahead(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    _linked_files(root, b"needle\n" + b"y" * 4_000_000 + b"\n", 300)
    late = _late_helper(1.0, reply_timeout=4.0)
    assert late.warm(WARM_SECONDS)
    tracemalloc.start()
    try:
        search(
            Workspace(root), SearchParams(pattern="needle", mode="files", max_results=5), screen_helper=late
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        late.stop()

    # The files are 4 MiB each: a few at a time, not the dozens screened while the helper was late.
    assert peak < 48 * 1_048_576


def test_the_helper_runs_no_code_from_a_project_on_the_server_venv_path(tmp_path: Path) -> None:
    project = (tmp_path / "project").resolve()
    project.mkdir()
    marker = project / "ran-outside-the-sandbox"
    (project / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    # An editable install of the project into the server's venv, outside the project (poetry, hatch).
    path_file = Path(site.getsitepackages()[0]) / "zz_test_editable_project.pth"
    path_file.write_text(f"{project}\n")
    started = ScreenHelper()
    try:
        assert started.warm(WARM_SECONDS)
    finally:
        started.stop()
        path_file.unlink()

    assert not marker.exists()


def _slow_then_small(root: Path) -> None:
    """64 small files (the first chunk, screened here at once), then 320 files on which SLOW_PATTERN
    takes about a tenth of a second each, for the helper."""
    root.mkdir()
    for n in range(64):
        (root / f"a{n:03}.txt").write_text("small\n")
    _linked_files(root, _random_text(128 * 1024), 320, stem="b")


def _small_tree(root: Path) -> Workspace:
    root.mkdir()
    for n in range(192):
        (root / f"c{n:03}.txt").write_text("needle\n" if n == 150 else "hay\n")
    return Workspace(root.resolve())


def test_a_search_after_one_that_ran_out_of_time_gets_the_same_result_as_alone(tmp_path: Path) -> None:
    # The small searches' second is on the machine's clock: a search held behind what the helper still
    # had of the slow one would stop early, and differ.
    limits = SearchLimits(time_seconds=1.0)
    _slow_then_small(tmp_path / "slow")
    small = _small_tree(tmp_path / "small")
    alone = search(small, SearchParams(pattern="needle"), screen_helper=None, limits=limits).structured
    started = ScreenHelper()
    assert started.warm(WARM_SECONDS)
    try:
        slow = search(
            Workspace((tmp_path / "slow").resolve()),
            SearchParams(pattern=SLOW_PATTERN, regex=True),
            screen_helper=started,
            limits=SearchLimits(time_seconds=1.0, clock=TickingClock(0.02)),
        )
        after = search(small, SearchParams(pattern="needle"), screen_helper=started, limits=limits).structured
    finally:
        started.stop()

    assert slow.structured is not None
    assert slow.structured["stopped_early"] is True
    # What the helper still held of the slow search ended with it: the next search waits behind nothing.
    assert after == alone


def test_a_search_after_pages_that_stopped_early_gets_the_same_result_as_alone(tmp_path: Path) -> None:
    limits = SearchLimits(time_seconds=1.0)
    first = tmp_path / "first"
    first.mkdir()
    # Six chunks; each page fills in the second (screened here), leaving the ones after at the helper.
    for n in range(6 * 64):
        (first / f"f{n:03}.txt").write_text("needle\n" if n in (70, 71) else "hay\n")
    small = _small_tree(tmp_path / "small")
    alone = search(small, SearchParams(pattern="needle"), screen_helper=None, limits=limits).structured
    late = _late_helper(0.3)
    assert late.warm(WARM_SECONDS)
    try:
        for _ in range(3):
            page = search(
                Workspace(first.resolve()),
                SearchParams(pattern="needle", max_results=1),
                screen_helper=late,
                limits=limits,
            )
            assert page.structured is not None
            assert page.structured["truncated"] is True
        after = search(small, SearchParams(pattern="needle"), screen_helper=late, limits=limits).structured
    finally:
        late.stop()

    # Replies left over from those pages neither hold this search past its time nor take its place.
    assert after == alone


def test_matches_the_helper_found_in_time_are_shown_as_alone(tmp_path: Path) -> None:
    # The machine's clock: what is tested is the helper's reply arriving in real time. Room for the
    # helper to screen its chunk (about 1 s on 2 shared cores, while this process screens too); the
    # slow files after it take far longer, so both searches still stop early. (On a clock that ticks
    # a reading, the slow files screened here meanwhile took 18 s to spend the same budget.)
    limits = SearchLimits(time_seconds=4.0)
    root = tmp_path / "tree"
    root.mkdir()
    # Chunk 3 (the helper's, quick) holds the only match; chunk 7 on (slow) is what this process
    # screens meanwhile, looking for the helper's reply between a few files.
    for letter in "abdef":
        for n in range(64):
            (root / f"{letter}{n:03}.txt").write_text("small\n")
    medium = _random_text(12 * 1024)
    for n in range(64):
        (root / f"c{n:03}.txt").write_bytes(medium + (b"\nneedle\n" if n == 63 else b"\n"))
    _linked_files(root, _random_text(128 * 1024), 128, stem="g")
    workspace = Workspace(root.resolve())
    params: dict[str, Any] = {"pattern": SLOW_PATTERN + "|needle", "regex": True}
    alone = search(workspace, SearchParams(**params), screen_helper=None, limits=limits).structured
    started = ScreenHelper()
    assert started.warm(WARM_SECONDS)
    try:
        with_helper = search(
            workspace, SearchParams(**params), screen_helper=started, limits=limits
        ).structured
    finally:
        started.stop()

    assert alone is not None
    assert with_helper is not None
    assert [m["path"] for m in alone["matches"]] == ["c063.txt"]
    assert alone["stopped_early"] is True
    assert with_helper["matches"] == alone["matches"]


def test_a_truncated_page_says_stopped_early_only_as_it_does_alone(
    tmp_path: Path, helper: CountingHelper
) -> None:
    limits = SearchLimits(scan_entries=45)
    root = tmp_path / "tree"
    for folder in range(20):
        for n in range(10):
            path = root / f"d{folder:02}" / f"f{n}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("needle\n" if (folder, n) in {(1, 0), (1, 1)} else "hay\n")
    workspace = Workspace(root.resolve())

    alone = search(
        workspace, SearchParams(pattern="needle", max_results=1), screen_helper=None, limits=limits
    ).structured
    with_helper = search(
        workspace, SearchParams(pattern="needle", max_results=1), screen_helper=helper, limits=limits
    ).structured

    assert alone is not None
    assert (alone["truncated"], alone["stopped_early"]) == (True, False)
    assert with_helper == alone


def test_a_relative_library_path_into_the_project_keeps_the_helper_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = (tmp_path / "project").resolve()
    (project / "lib").mkdir(parents=True)
    # The helper runs from /, where the loader reads a relative entry from; the server runs elsewhere.
    monkeypatch.setenv("LD_LIBRARY_PATH", str(project / "lib").lstrip("/"))
    monkeypatch.chdir(tmp_path)
    helper_module._helper_code.cache_clear()
    try:
        assert helper_module.runs_code_inside(project)
    finally:
        helper_module._helper_code.cache_clear()


def test_pages_that_fill_while_the_helper_holds_requests_leave_it_room_for_later_searches(
    tmp_path: Path,
) -> None:
    limits = SearchLimits(time_seconds=5.0)
    many = tmp_path / "many"
    many.mkdir()
    # Every file from the second chunk on matches and a page holds 40 lines: each page fills in that
    # chunk, screened here, with the chunks after it at a helper too slow to have answered by then.
    for n in range(8 * 64):
        (many / f"f{n:03}.txt").write_text("needle\n" if n >= 64 else "hay\n")
    small = _small_tree(tmp_path / "small")
    answered = tmp_path / "answered"
    answered.touch()
    late = _late_helper(0.2, factory=CountingHelper, answered=answered)
    assert isinstance(late, CountingHelper)
    assert late.warm(WARM_SECONDS)
    try:
        for _ in range(2):
            page = search(
                Workspace(many.resolve()),
                SearchParams(pattern="needle", max_results=40),
                screen_helper=late,
                limits=limits,
            )
            assert page.structured is not None
            assert page.structured["truncated"] is True
        held, sent = late.unanswered, late.sent
        # Every request of those pages answered (UNREACHED, after their CANCEL), the answers unread.
        end = time.monotonic() + 60
        while answered.stat().st_size < sent and time.monotonic() < end:
            time.sleep(0.05)
        after = every_page(small, late, pattern="needle", limits=limits)
    finally:
        late.stop()

    assert held == helper_module.IN_FLIGHT_MAX
    assert after == every_page(small, None, pattern="needle", limits=limits)
    assert late.sent > sent
