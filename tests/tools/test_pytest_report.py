"""Reading pytest's report: nested runs in a test's output, a crash, a run stopped at its time limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from oct_mcp.spec import RunResult
from oct_mcp.tools.python.pytest_report import SkipReason, read_report, report_chars
from oct_mcp.tools.python.test import _parse_pytest

pytestmark = pytest.mark.e2e

OUTPUT = Path(__file__).parent.parent / "data" / "pytest_output"
ROOT = Path("/home/dev/project")


def _run(name: str, *, exit_code: int, timed_out: bool = False) -> RunResult:
    stdout = (OUTPUT / name).read_bytes()
    return RunResult(
        exit_code=exit_code,
        stdout=stdout,
        stderr=b"",
        output_bytes=len(stdout),
        truncated=False,
        timed_out=timed_out,
        duration_seconds=300.2,
        backend="landlock",
    )


def test_a_nested_pytester_run_in_a_tests_output_is_part_of_that_failure_not_a_failure_of_its_own() -> None:
    report = read_report((OUTPUT / "nested_pytester.txt").read_text())

    assert report.counts == {"passed": 1, "failed": 5, "errors": 1, "skipped": 1}
    assert [(f.node_id, f.kind) for f in report.failures] == [
        ("tests/test_outer.py::test_plain_failure", "failed"),
        ("tests/test_outer.py::test_inner_run_reports", "failed"),
        ("tests/test_outer.py::test_after_inner", "failed"),
        ("tests/test_outer.py::test_quiet_inner_run", "failed"),
        ("tests/test_outer.py::test_last", "failed"),
        ("tests/test_outer.py::test_uses_broken", "error"),
    ]
    messages = {f.node_id.rpartition("::")[2]: f.message for f in report.failures}
    assert messages["test_after_inner"] == "KeyError: 'after'"
    assert messages["test_last"] == "AssertionError: three is not more than four\nassert 3 > 4"
    assert messages["test_uses_broken"] == "RuntimeError: fixture broke"
    # The outer assertion only: the nested run's own `E` lines stay in the traceback, as output.
    assert messages["test_inner_run_reports"].startswith("AssertionError: assert {'passed': 1,")
    assert "inner fixture" not in messages["test_inner_run_reports"]
    inner = next(f for f in report.failures if f.node_id.endswith("test_inner_run_reports"))
    assert "FAILED test_inner.py::test_inner_fails - assert 1 == 2" in inner.traceback
    quiet = next(f for f in report.failures if f.node_id.endswith("test_quiet_inner_run"))
    assert "1 failed in" in quiet.traceback
    assert "test_last" not in quiet.traceback
    assert report.skips == [SkipReason(reason="needs a GPU", count=1, where="tests/test_outer.py")]


def test_a_crashed_run_returns_the_counts_pytest_printed_and_says_it_crashed() -> None:
    result = _parse_pytest(["ran: python -m pytest"], ROOT)(_run("internal_error.txt", exit_code=3))

    assert result.is_error is False
    assert result.structured is not None
    counts = {key: result.structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": 2, "failed": 1, "errors": 0, "skipped": 1}
    assert result.structured["ended"] == "crashed"
    (note, _) = result.structured["notes"]
    assert note.startswith(
        "[tool_failed] pytest crashed with an internal error (exit code 3: SystemError: AST"
    )
    assert result.text.startswith(note)


def test_a_run_interrupted_at_its_time_limit_returns_its_counts_failures_and_skip_reasons() -> None:
    result = _parse_pytest([], ROOT)(_run("timeout_interrupted.txt", exit_code=2, timed_out=True))

    assert result.structured is not None
    assert result.structured["ended"] == "timed_out"
    counts = {key: result.structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": 2, "failed": 2, "errors": 0, "skipped": 1}
    assert [f["node_id"] for f in result.structured["failures"]] == [
        "tests/test_x.py::test_a",
        "tests/test_x.py::test_c",
    ]
    assert result.structured["skips"] == [
        {"reason": "no network here", "count": 1, "where": "tests/test_x.py"}
    ]
    assert result.structured["notes"][0].startswith("[timeout] the run reached its time limit after 300 s")


def test_a_run_killed_before_its_counts_line_is_counted_from_its_progress_characters() -> None:
    result = _parse_pytest([], ROOT)(_run("timeout_killed.txt", exit_code=-9, timed_out=True))

    assert result.structured is not None
    counts = {key: result.structured[key] for key in ("passed", "failed", "errors", "skipped")}
    assert counts == {"passed": 2, "failed": 2, "errors": 0, "skipped": 1}
    assert result.structured["failures"] == []
    assert "read from its progress line" in result.structured["notes"][0]


def test_an_interrupted_run_that_did_not_time_out_is_still_a_failure_to_run() -> None:
    result = _parse_pytest([], ROOT)(_run("timeout_interrupted.txt", exit_code=2))

    assert result.is_error is True
    assert result.text.startswith("[tool_failed] pytest failed (exit code 2)")


def test_the_projects_own_report_characters_are_kept() -> None:
    config = '[tool.pytest.ini_options]\naddopts = "-rsfE --strict-markers"\n[tox]\ndeps = -r a.txt\n'

    assert report_chars(config) == "sfE"
    assert report_chars('addopts = ["-r", "xX"]') == "xX"
    assert report_chars("addopts = -v") == ""
