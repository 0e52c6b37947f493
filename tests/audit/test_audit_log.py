"""The audit log on disk: the hash chain across rotations, concurrent writers, verify, tail, failures."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
import structlog
from clients import handshake
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.audit import (
    GENESIS,
    AuditWriter,
    audit_files,
    describe_record,
    iter_records,
    line_digest,
    read_tail,
    rotated_path,
    verify_chain,
)
from oct_mcp.audit.records import render_record

pytestmark = pytest.mark.e2e

# About five records of the size below per file: a few dozen records rotate several times.
SMALL_FILE = 1_000


def _writer(path: Path, *, max_bytes: int = SMALL_FILE, max_files: int = 100) -> AuditWriter:
    return AuditWriter(path, max_bytes=max_bytes, max_files=max_files)


def _fill(writer: AuditWriter, count: int, **fields: object) -> None:
    for index in range(count):
        assert writer.write({"tool": "oct_read_file", "outcome": "ok", "index": index, **fields})


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def test_each_record_links_to_the_exact_line_before_it_starting_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 3)

    lines = _lines(path)
    records = [json.loads(line) for line in lines]

    assert [r["prev"] for r in records] == [GENESIS, line_digest(lines[0]), line_digest(lines[1])]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert list(records[0])[:2] == ["time", "tool"]
    assert records[0]["time"].endswith("Z")


def test_the_chain_runs_on_across_rotations_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path), 40)

    files = audit_files(path)
    verification = verify_chain(path)

    assert len(files) > 4
    assert all(f.stat().st_size <= SMALL_FILE for f in files)
    first_of_newest = json.loads(_lines(files[-1])[0])
    assert first_of_newest["prev"] == line_digest(_lines(files[-2])[-1])
    assert verification.is_intact
    assert verification.records == 40
    assert [r["index"] for r in iter_records(path)] == list(range(40))


def test_rotation_keeps_at_most_max_files_rotated_files_and_the_rest_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_files=2), 40)

    verification = verify_chain(path)

    assert [f.name for f in audit_files(path)] == ["audit.log.2", "audit.log.1", "audit.log"]
    assert verification.is_intact
    assert verification.first_seq is not None
    assert verification.first_seq > 1


def test_files_are_created_owner_only_in_a_directory_created_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "audit.log"
    _fill(_writer(path), 20)

    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in path.parent.iterdir()}

    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(modes) > 2
    assert set(modes.values()) == {0o600}


@pytest.mark.anyio
async def test_eight_concurrent_writers_across_rotations_lose_and_interleave_no_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    writer = _writer(path, max_bytes=int(0.01 * 1024 * 1024))
    per_writer = 60

    def write_many(name: int) -> None:
        for index in range(per_writer):
            assert writer.write({"writer": name, "index": index, "padding": "x" * 64})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            for name in range(8):
                tasks.start_soon(anyio.to_thread.run_sync, write_many, name)

    records = list(iter_records(path))
    lines = sum(len(_lines(f)) for f in audit_files(path))
    assert len(audit_files(path)) > 3
    assert lines == len(records) == 8 * per_writer
    assert sorted((r["writer"], r["index"]) for r in records) == [
        (w, i) for w in range(8) for i in range(per_writer)
    ]
    assert [r["seq"] for r in records] == list(range(1, 8 * per_writer + 1))
    assert verify_chain(path).is_intact


def test_two_writers_on_one_file_as_two_servers_would_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    first, second = _writer(path), _writer(path)

    for index in range(30):
        assert (first if index % 3 else second).write({"index": index})

    assert verify_chain(path).is_intact
    assert [r["index"] for r in iter_records(path)] == list(range(30))


def test_a_new_writer_continues_the_chain_from_the_last_line_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 2)
    last = _lines(path)[-1]

    _fill(_writer(path, max_bytes=1_000_000), 1)

    record = json.loads(_lines(path)[-1])
    assert (record["prev"], record["seq"]) == (line_digest(last), 3)
    assert verify_chain(path).is_intact


def test_a_new_writer_on_an_empty_log_links_to_the_last_line_of_the_rotated_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 2)
    path.rename(rotated_path(path, 1))
    path.touch(mode=0o600)

    _fill(_writer(path, max_bytes=1_000_000), 1)

    assert json.loads(_lines(path)[0])["prev"] == line_digest(_lines(rotated_path(path, 1))[-1])
    assert verify_chain(path).is_intact


def test_a_torn_last_line_is_ended_linked_and_reported_by_verify(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 2)
    with path.open("ab") as file:
        file.write(b'{"time":"2026-')

    _fill(_writer(path, max_bytes=1_000_000), 1)

    lines = _lines(path)
    assert len(lines) == 4
    assert json.loads(lines[3])["prev"] == line_digest(b'{"time":"2026-')
    assert [(b.line, b.problem) for b in verify_chain(path).breaks] == [
        (3, "changed: not a JSON audit record")
    ]


def test_verify_finds_a_changed_line_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 6)
    lines = _lines(path)
    lines[2] = lines[2].replace(b'"outcome":"ok"', b'"outcome":"no"')
    _rewrite(path, lines)

    verification = verify_chain(path)

    assert not verification.is_intact
    assert [(b.file, b.line) for b in verification.breaks] == [(path, 3)]
    assert verification.breaks[0].problem.startswith("changed:")


def test_verify_finds_a_deleted_line_at_the_line_that_follows_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 6)
    lines = _lines(path)
    del lines[3]
    _rewrite(path, lines)

    verification = verify_chain(path)

    assert [(b.file, b.line) for b in verification.breaks] == [(path, 4)]
    assert verification.breaks[0].problem.startswith("deleted: 1 record(s) missing")


def test_verify_finds_reordered_lines_at_the_first_one_out_of_place(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 6)
    lines = _lines(path)
    lines[2], lines[3] = lines[3], lines[2]
    _rewrite(path, lines)

    verification = verify_chain(path)

    assert verification.breaks[0].line == 3
    assert {b.problem.split(":")[0] for b in verification.breaks} == {"reordered"}


def test_verify_finds_rotated_files_put_in_the_wrong_order(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path), 30)
    one, two = rotated_path(path, 1), rotated_path(path, 2)
    one.rename(tmp_path / "swap")
    two.rename(one)
    (tmp_path / "swap").rename(two)

    verification = verify_chain(path)

    # Oldest first, the file now named .2 holds the newer records: its first line is out of place.
    assert (verification.breaks[0].file, verification.breaks[0].line) == (two, 1)
    assert verification.breaks[0].problem.startswith("reordered")


def test_verify_finds_a_rotated_file_deleted_from_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path), 30)
    rotated_path(path, 2).unlink()

    verification = verify_chain(path)

    assert [(b.file, b.line) for b in verification.breaks] == [(rotated_path(path, 1), 1)]
    assert verification.breaks[0].problem.startswith("deleted:")


def test_verify_of_a_missing_log_finds_no_files_and_no_intact_chain(tmp_path: Path) -> None:
    verification = verify_chain(tmp_path / "audit.log")

    assert verification.files == ()
    assert not verification.is_intact


def test_a_record_without_prev_at_the_start_is_a_break(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text('{"tool":"x"}\n')

    assert [(b.line, b.problem.split(":")[0]) for b in verify_chain(path).breaks] == [
        (1, "changed"),
        (1, "unsealed"),  # written by hand: no head beside it
    ]


def test_a_write_to_a_path_under_a_file_fails_without_raising_and_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    writer = _writer(blocker / "audit.log")

    with structlog.testing.capture_logs() as logs:
        written = [writer.write({"index": index}) for index in range(3)]

    assert written == [False, False, False]
    failure = writer.failure
    assert failure is not None
    assert failure.lost == 3
    assert "Not a directory" in failure.reason
    assert writer.status().startswith("failing since ")
    assert [(e["event"], e["log_level"]) for e in logs] == [("audit_write_failed", "error")]


def test_a_writer_that_recovers_says_how_many_records_were_lost_and_keeps_its_chain(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    path = directory / "audit.log"
    writer = _writer(path, max_bytes=1_000_000)
    _fill(writer, 2)
    shutil.move(directory, tmp_path / "moved")
    directory.write_text("in the way")
    assert not writer.write({"index": 2})

    directory.unlink()
    with structlog.testing.capture_logs() as logs:
        assert writer.write({"index": 3})

    record = json.loads(_lines(path)[0])
    assert (record["lost_before"], record["seq"]) == (1, 3)
    assert record["prev"] == line_digest(_lines(tmp_path / "moved" / "audit.log")[-1])
    assert writer.failure is None
    assert [e["event"] for e in logs] == ["audit_recovered"]


def test_a_directory_that_disappears_is_made_again_on_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.log"
    writer = _writer(path)
    _fill(writer, 2)
    shutil.rmtree(path.parent)

    assert writer.write({"index": 2})

    assert json.loads(_lines(path)[0])["seq"] == 3


def test_status_says_writable_or_names_what_is_in_the_way_and_creates_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    existing = tmp_path / "existing.log"
    existing.write_text("")
    directory = tmp_path / "a-directory.log"
    directory.mkdir()

    assert _writer(tmp_path / "new" / "deeper" / "audit.log").status() == "writable"
    assert _writer(existing).status() == "writable"
    assert _writer(blocker / "audit.log").status() == f"failing ({blocker} is not a directory)"
    assert _writer(directory).status() == f"failing ({directory} is not a file)"
    assert not (tmp_path / "new").exists()


def test_status_names_a_directory_it_may_not_write_to() -> None:
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(mode=0o500)

        assert (
            _status_as_unprivileged_user(locked / "audit.log") == f"failing (cannot create files in {locked})"
        )
    finally:
        shutil.rmtree(base)


def _status_as_unprivileged_user(path: Path) -> str:
    """The writer's status as the user `nobody` would see it: root may write anywhere."""
    if os.geteuid() != 0:
        return _writer(path).status()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, answer through the pipe, and leave at once
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(write_end, _writer(path).status().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        status = answer.read().decode()
    os.waitpid(pid, 0)
    return status


def test_a_writer_needs_a_positive_size_and_count(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        AuditWriter(tmp_path / "audit.log", max_bytes=0, max_files=1)


def test_tail_reads_the_last_records_back_through_the_rotated_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path), 30)

    tail = [json.loads(raw)["index"] for raw in read_tail(path, 12)]

    assert tail == list(range(18, 30))
    assert len(read_tail(path, 1_000)) == 30
    assert read_tail(path, 0) == []


def test_a_record_is_described_on_one_line_time_tool_outcome_reason_duration() -> None:
    refused = json.dumps(
        {"time": "T", "tool": "oct_write", "outcome": "refused", "code": "policy", "duration_ms": 1.25}
    ).encode()
    failed = json.dumps({"time": "T", "tool": "oct_test", "outcome": "error", "exit_code": 2}).encode()

    assert describe_record(refused).split() == ["T", "oct_write", "refused", "policy", "1.2", "ms"]
    assert describe_record(failed).split() == ["T", "oct_test", "error", "exit", "2", "-"]
    assert describe_record(b"garbage").startswith("(not a JSON audit record")


def test_verify_says_where_a_second_chain_was_started_inside_the_log(tmp_path: Path) -> None:
    path, other = tmp_path / "audit.log", tmp_path / "other.log"
    _fill(_writer(path, max_bytes=1_000_000), 2)
    _fill(_writer(other, max_bytes=1_000_000), 2)
    _rewrite(path, _lines(path) + _lines(other))

    found = verify_chain(path).breaks

    # Its records are not sealed by this log's head either: both are said, at the line they start.
    assert [(b.line, b.problem.split(":")[0]) for b in found] == [
        (3, "a new chain starts here"),
        (3, "unsealed"),
    ]


def test_verify_finds_a_record_moved_back_after_the_line_it_followed_was_deleted(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 6)
    _deleted, second, third, fourth, fifth, sixth = _lines(path)
    _rewrite(path, [third, fourth, second, fifth, sixth])

    problems = [(b.line, b.problem) for b in verify_chain(path).breaks]

    assert (3, "reordered: seq 2 follows seq 4") in problems


def test_a_log_file_removed_while_serving_is_made_again_and_the_chain_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    writer = _writer(path, max_bytes=1_000_000)
    _fill(writer, 2)
    last = _lines(path)[-1]
    path.unlink()

    assert writer.write({"index": 2})

    record = json.loads(_lines(path)[0])
    assert (record["seq"], record["prev"]) == (3, line_digest(last))
    assert verify_chain(path).first_seq == 3


def test_a_rotation_that_fails_keeps_the_record_in_the_current_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    rotated_path(path, 1).mkdir()
    writer = _writer(path, max_bytes=300, max_files=1)

    with structlog.testing.capture_logs() as logs:
        _fill(writer, 4)

    assert len(_lines(path)) == 4
    assert verify_chain(path).is_intact
    assert {e["event"] for e in logs} == {"audit_rotation_failed"}


def test_a_record_that_cannot_be_rendered_is_lost_without_raising(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "audit.log")

    with structlog.testing.capture_logs():
        written = writer.write({"keys": {("not", "a", "string"): 1}})

    assert written is False
    assert writer.failure is not None
    assert writer.failure.reason == "TypeError"


# The line's rendering: orjson where it can, json.dumps where it cannot, ASCII either way.

# What JSON holds: no NaN and no infinity (json.dumps writes `Infinity`, which is not JSON).
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(fields=st.dictionaries(st.text(), _JSON_VALUES, max_size=6))
def test_a_record_renders_as_one_ascii_line_of_the_same_json(fields: dict[str, object]) -> None:
    line = render_record(fields)

    assert line.isascii()
    assert b"\n" not in line
    assert json.loads(line) == json.loads(json.dumps(fields))


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("line\u2028separator", b"\\u2028"),  # UTF-8 from orjson: rendered again with escapes
        ("caf\u00e9 \u0085", b"\\u0085"),
        ("lone \ud800 surrogate", b"\\ud800"),  # orjson refuses it
        (2**70, b"1180591620717411303424"),  # over 64 bits: orjson refuses it
    ],
)
def test_what_orjson_cannot_write_as_ascii_goes_through_json(value: object, escaped: bytes) -> None:
    line = render_record({"tool": value})

    assert line.isascii()
    assert escaped in line


def test_the_time_is_utc_to_the_microsecond(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "audit.log")
    _fill(writer, 1)

    stamp = json.loads(_lines(tmp_path / "audit.log")[0])["time"]

    assert len(stamp) == len("2026-12-01T03:25:20.366440Z")
    assert stamp.endswith("Z")


# -- the end of the log, sealed in its head --------------------------------------------------------


def _head(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def test_the_head_seals_the_last_record_in_an_owner_only_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 3)

    sealed = json.loads(_head(path).read_bytes())

    assert (sealed["seq"], sealed["hash"]) == (3, line_digest(_lines(path)[-1]))
    assert stat.S_IMODE(_head(path).stat().st_mode) == 0o600


def test_verify_reports_a_log_whose_end_was_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 5)
    _rewrite(path, _lines(path)[:3])

    verification = verify_chain(path)

    assert not verification.is_intact
    assert [(b.file, b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(path, 3, "cut")]


def test_verify_reports_a_last_record_changed_in_place(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 3)
    lines = _lines(path)
    lines[-1] = lines[-1].replace(b'"outcome":"ok"', b'"outcome":"no"')
    _rewrite(path, lines)

    verification = verify_chain(path)

    assert [(b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(3, "changed")]


def test_a_writer_that_finds_the_log_cut_records_a_chain_break_and_never_reuses_numbers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 5)
    _rewrite(path, _lines(path)[:3])

    _fill(_writer(path, max_bytes=1_000_000), 1)

    records = list(iter_records(path))
    assert [r["seq"] for r in records] == [1, 2, 3, 6, 7]
    assert records[3]["event"] == "chain_break"
    assert records[4]["index"] == 0
    verification = verify_chain(path)
    assert [(b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(4, "chain_break")]


def _forged_next(path: Path, **fields: object) -> bytes:
    """A record chained exactly as the writer would chain it after the log's last line."""
    last = _lines(path)[-1]
    record = {"time": "2026-01-01T00:00:00.000000Z", **fields}
    record["seq"] = json.loads(last)["seq"] + 1
    record["prev"] = line_digest(last)
    return render_record(record)


def test_verify_reports_a_correctly_chained_record_appended_after_the_sealed_one(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 3)
    lines = _lines(path)
    forged = _forged_next(path, tool="oct_read_file", outcome="ok", index=99)
    _rewrite(path, [*lines, forged, _forged_after(forged)])

    verification = verify_chain(path)

    assert not verification.is_intact
    assert [(b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(4, "unsealed")]
    assert "2 record(s)" in verification.breaks[0].problem


def _forged_after(line: bytes) -> bytes:
    record = {"time": "2026-01-01T00:00:00.000000Z", "tool": "oct_edit", "outcome": "ok"}
    record["seq"] = json.loads(line)["seq"] + 1
    record["prev"] = line_digest(line)
    return render_record(record)


def test_a_writer_never_seals_records_it_finds_after_the_sealed_one(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 3)
    _rewrite(path, [*_lines(path), _forged_next(path, tool="oct_read_file", outcome="ok", index=99)])

    _fill(_writer(path, max_bytes=1_000_000), 1)

    records = list(iter_records(path))
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[4]["event"] == "chain_break"
    assert records[4]["problem"].startswith("unsealed")
    verification = verify_chain(path)
    assert [(b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(5, "chain_break")]


def test_verify_reports_a_log_without_its_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    _fill(_writer(path, max_bytes=1_000_000), 2)
    _head(path).unlink()

    verification = verify_chain(path)

    assert [(b.line, b.problem.split(":")[0]) for b in verification.breaks] == [(2, "unsealed")]


# -- another process holding the lock -------------------------------------------------------------


def _hold_lock(path: Path) -> subprocess.Popen[str]:
    """A second process that takes the log's lock and keeps it until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            str(path.with_name(path.name + ".lock")),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def _release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)
    if holder.stdout is not None:
        holder.stdout.close()


def test_a_record_the_lock_keeps_out_is_lost_counted_and_noted_once_the_lock_comes_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    writer = _writer(path, max_bytes=1_000_000)
    _fill(writer, 1)
    holder = _hold_lock(path)
    try:
        probed = _writer(path).status()
        written = writer.write({"index": 1})
        status = writer.status()
    finally:
        _release(holder)

    assert probed.startswith("writable, but the audit lock (.lock file) is held by another process now")
    assert written is False
    assert "1 record(s) lost" in status
    assert writer.write({"index": 2})
    records = list(iter_records(path))
    assert [(r["seq"], r.get("lost_before")) for r in records] == [(1, None), (2, 1)]


def test_a_call_answers_and_sigterm_stops_the_server_while_another_process_holds_the_lock(
    project: Path, tmp_path: Path, config_file: Path
) -> None:
    audit_log = tmp_path / "logs" / "audit.log"
    audit_log.parent.mkdir(mode=0o700)
    config_file.write_text(json.dumps({"audit_log_path": str(audit_log)}))
    holder = _hold_lock(audit_log)
    command = [sys.executable, "-m", "oct_mcp", "--project-root", str(project), "--config", str(config_file)]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        handshake(server)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "oct_read_file", "arguments": {"path": "README.md"}}
        server.stdin.write(json.dumps(call).encode() + b"\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], 30)
        answer = json.loads(server.stdout.readline()) if ready else None
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pipe in (server.stdin, server.stdout, server.stderr):
            if pipe is not None:
                pipe.close()
        _release(holder)

    assert answer is not None
    assert answer["id"] == 2
    assert answer["result"]["isError"] is False
    assert code == 0
