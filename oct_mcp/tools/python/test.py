"""oct_test: pytest's results, each failure with its place and message, read from its own report."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field

from oct_mcp.backends.installs import install_roots
from oct_mcp.errors import InstallRefusedError
from oct_mcp.execution.caches import project_cache
from oct_mcp.spec import (
    CommandPlan,
    ProjectPath,
    Risk,
    RunResult,
    StrictParams,
    ToolEnv,
)
from oct_mcp.tools._paging.results import MODEL_VIEW_BUDGET, take_within
from oct_mcp.tools._project.programs import find_program, find_python, script_interpreter
from oct_mcp.tools.python.pytest_report import (
    PytestReport,
    SkipReason,
    TestFailure,
    read_report,
    report_chars,
)
from oct_mcp.tools.python.refusals import refusal_notes
from oct_mcp.tools.python.running import (
    HIDDEN_NAMED,
    IGNORED_MAX,
    MAX_PATHS,
    PytestExpression,
    python_tool_spec,
    read_config,
    tool_failed,
)
from oct_mcp.tools.python.unseen import hidden_links
from oct_mcp.types import ToolResult

__all__ = ["TEST", "TestOutput", "TestParams", "pytest_command"]


class TestParams(StrictParams):
    paths: list[ProjectPath] = Field(
        default_factory=list, max_length=MAX_PATHS, description="Files, folders or node ids."
    )
    keyword: PytestExpression | None = Field(default=None, description="A -k expression.")
    marker: PytestExpression | None = Field(default=None, description="A -m expression.")
    max_failures: int | None = Field(default=None, ge=1, le=10_000)
    jobs: int | None = Field(default=None, ge=1, le=256, description="pytest-xdist workers.")
    last_failed: bool = Field(default=False)


class TestOutput(BaseModel):
    passed: int
    failed: int
    errors: int
    skipped: int
    duration_seconds: float | None
    failures: list[TestFailure]
    failures_omitted: int = 0
    """Failures past the result's budget, counted and not shown: run fewer tests to see them."""
    skips: list[SkipReason] = Field(default_factory=list)
    """Why tests were skipped, as pytest reported it, one entry per reason and file."""
    ended: Literal["finished", "timed_out", "crashed"] = "finished"
    """`timed_out` or `crashed`: pytest stopped early; the counts and failures are those it reported
    until then (from its progress characters when it printed no counts line)."""
    exit_code: int | None
    notes: list[str] = Field(default_factory=list)
    """How oct ran the tests (which interpreter, serial instead of parallel), and why; what stopped a
    run early."""


_PROGRESS: Final = re.compile(rb"\[\s*(\d{1,3})%\]\s*$")


_COVERAGE_FILE: Final = "coverage/.coverage"


def _has_xdist(python: Path) -> bool:
    prefix = python.parent.parent
    return any(
        any(prefix.glob(f"lib/python3*/{folder}/xdist/__init__.py"))
        for folder in ("site-packages", "dist-packages")
    )


def _parse_pytest(notes: list[str], root: Path) -> Callable[[RunResult], ToolResult]:
    def parse(run: RunResult) -> ToolResult:
        text = run.stdout.decode(errors="replace")
        report = read_report(text)
        ended: Literal["finished", "timed_out", "crashed"] = "finished"
        stopped: list[str] = []
        if run.timed_out:
            ended = "timed_out"
            stopped.append(
                f"[timeout] the run reached its time limit after {run.duration_seconds:.0f} s and was "
                f"stopped: {_what_was_reported(report)}; raise timeout_test_seconds, or run fewer tests "
                "(paths, keyword)"
            )
        elif run.exit_code == 3 and report.internal_error is not None:
            # pytest's exit codes: 0 passed, 1 failures, 5 no tests collected, 3 an internal error,
            # which it prints as INTERNALERROR lines after the tests it ran.
            ended = "crashed"
            stopped.append(
                f"[tool_failed] pytest crashed with an internal error (exit code 3: "
                f"{report.internal_error}); {_what_was_reported(report)}; the tests after it did not "
                "run: run them with paths, or run `python -m pytest` in a terminal to see the whole error"
            )
        elif run.exit_code not in (0, 1, 5) or (run.exit_code == 1 and not report.summarised):
            # Others: it could not run (2 interrupted or a usage error, 4 a bad command line). A 1 with
            # no summary line is a crash on the way out (a plugin that could not write its report).
            return tool_failed(
                "pytest",
                run,
                "pytest could not run the tests (the end of its output says why); fix that, or run "
                "`python -m pytest` in a terminal in the project to compare",
            )
        every = report.failures
        failures, _ = take_within(every, MODEL_VIEW_BUDGET)
        all_notes = [*stopped, *notes, *refusal_notes(every, run.backend, root)]
        output = TestOutput(
            **report.counts,
            duration_seconds=report.duration if report.summarised else run.duration_seconds,
            failures=failures,
            failures_omitted=len(every) - len(failures),
            skips=report.skips,
            ended=ended,
            exit_code=run.exit_code,
            notes=all_notes,
        )
        body = text[-MODEL_VIEW_BUDGET:]
        return ToolResult(
            text="\n".join([*all_notes, body]) if all_notes else body, structured=output.model_dump()
        )

    return parse


def _what_was_reported(report: PytestReport) -> str:
    counts = ", ".join(f"{n} {word}" for word, n in report.counts.items())
    if report.summarised:
        return f"the counts ({counts}) and failures are those pytest reported until then"
    return f"pytest printed no counts; these ({counts}) are read from its progress line"


def _pytest_progress(line: bytes) -> tuple[float, float | None, str | None] | None:
    """A `[ 45%]` at the end of pytest's progress line becomes 45 of 100."""
    found = _PROGRESS.search(line)
    return (float(found.group(1)), 100.0, None) if found else None


def pytest_command(root: Path) -> tuple[list[str], Path | None, list[str]]:
    """How to start pytest as the developer does: `python -m pytest` with the project's interpreter.

    `-m` puts the root on sys.path as a terminal run does, so a flat layout that is not installed
    imports. Returns the argv's start, the interpreter (None: the script runs as it is) and a note.
    """
    found = find_python(root)
    if found is not None:
        python, where = found
        return [str(python), "-m", "pytest"], python, [f"ran: python -m pytest, with {where}'s interpreter"]
    script = find_program(root, "pytest")
    interpreter = script_interpreter(script)
    if interpreter is not None:
        return (
            [str(interpreter), "-m", "pytest"],
            interpreter,
            ["ran: python -m pytest, with pytest's interpreter"],
        )
    return [str(script)], None, ["ran: the pytest script (no Python interpreter found for it)"]


_PYTEST_CONFIGS: Final = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _asks_for_junit(root: Path) -> bool:
    """Whether the project's pytest config writes a JUnit report (`--junitxml` in addopts)."""
    return any("--junit" in (read_config(root / name) or "") for name in _PYTEST_CONFIGS)


def _report_chars(root: Path) -> str:
    """pytest's -r: failures, errors and skip reasons, plus what the project's config asks for, which
    the last -r on the command line would otherwise replace."""
    asked = report_chars("\n".join(read_config(root / name) or "" for name in _PYTEST_CONFIGS))
    return "".join(dict.fromkeys("fEs" + asked.replace("N", "")))


def _hidden_from_run(root: Path, program: Path) -> list[str]:
    """The project's links to places the run does not see, which pytest would fail to collect."""
    try:
        roots = install_roots(program, root)
    except InstallRefusedError:
        return []  # the sandbox refuses the run itself, and says why
    return hidden_links(root, roots)


def _plan_test(params: TestParams, env: ToolEnv) -> CommandPlan:
    root = env.workspace.root
    command, python, notes = pytest_command(root)
    cache = project_cache(root)
    argv: list[str] = [
        *command,
        "-q",
        f"-r{_report_chars(root)}",
        "--color=no",
        "--tb=short",
        "-o",
        f"cache_dir={cache}/pytest",
    ]
    if _asks_for_junit(root):
        # The last --junitxml wins over the one in addopts, which would write into the read-only project.
        argv.append(f"--junitxml={cache}/reports/junit.xml")
        notes.append("the JUnit report the config asks for went to oct's cache folder, not the project")
    if params.last_failed:
        argv.append("--last-failed")
    if params.keyword:
        argv += ["-k", params.keyword]
    if params.marker:
        argv += ["-m", params.marker]
    if params.max_failures:
        argv.append(f"--maxfail={params.max_failures}")
    if params.jobs and params.jobs > 1:
        if python is not None and _has_xdist(python):
            argv += ["-n", str(min(params.jobs, env.max_jobs))]
        else:
            notes.append("ran serially: jobs needs pytest-xdist, which the project's environment lacks")
    hidden = _hidden_from_run(root, Path(command[0]))
    if hidden:
        argv += [f"--ignore={link}" for link in hidden[:IGNORED_MAX]]
        more = len(hidden) - HIDDEN_NAMED
        shown = ", ".join(hidden[:HIDDEN_NAMED]) + (f" and {more} more" if more > 0 else "")
        notes.append(
            f"hidden from the run: {shown}: links to what lies outside the project and the sandbox "
            "does not show, so pytest was told to ignore them (--ignore), as if they were absent; run "
            "the tests under them in a terminal"
        )
    argv += ["--", *params.paths] if params.paths else []
    return CommandPlan(
        argv=tuple(argv),
        parse=_parse_pytest(notes, root),
        long_running=True,
        reports_when_interrupted=True,
        progress=_pytest_progress,
        # Plugins that write (coverage) write into the cache folder, not the read-only project.
        tool_env=(("COVERAGE_FILE", f"{cache}/{_COVERAGE_FILE}"),),
        project_cache=True,
    )


TEST: Final = python_tool_spec(
    "oct_test",
    "Run tests with pytest",
    (
        "Run the project's tests with pytest (project code, project read-only): counts, duration, and each "
        "failure's node id, message and traceback."
    ),
    TestParams,
    TestOutput,
    Risk.EXECUTE,
    _plan_test,
    program="pytest",
)
