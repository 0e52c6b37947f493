"""oct_list_tasks: the project's named tasks and the argv oct_run would use, read from its task files.

Nothing of the project runs: the files are read as data (task_files.py), each bounded in size.
A file that cannot be read is a problem listed with the tasks of the others, never a failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from oct_mcp.deadline import Deadline
from oct_mcp.errors import NotFoundError, OctError, PathRefusedError
from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.tools._paging.results import BudgetField, OffsetField, page
from oct_mcp.tools._project.task_files import (
    NAME_MAX_LENGTH,
    TASKS_MAX,
    Runner,
    Task,
    TaskFileError,
    hatch_tasks,
    is_task_name,
    make_tasks,
    nox_tasks,
    npm_tasks,
    pdm_tasks,
    pyproject_tasks,
    read_toml,
    tox_ini_tasks,
    tox_toml_tasks,
)
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace, read_at_most

__all__ = [
    "LIST_TASKS",
    "TASKS_MAX",
    "TASK_FILE_MAX_BYTES",
    "ListTasksOutput",
    "ListTasksParams",
    "ProjectTask",
    "TaskFileProblem",
    "find_tasks",
    "list_tasks",
]

TASK_FILE_MAX_BYTES: Final = 512 * 1_024
"""A task file larger than this is not read (a Makefile: only its first TASK_FILE_MAX_BYTES).
Hand-written task files are a few KiB; a generated Makefile may be larger, and is read in part."""
# GNU make reads the first of these that exists.
_MAKEFILES: Final = ("GNUmakefile", "makefile", "Makefile")


class ListTasksParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: ProjectPath = Field(default=".")
    max_chars: int = BudgetField()
    offset: int = OffsetField()


class ProjectTask(BaseModel):
    name: str
    runner: Runner
    source: str
    """The file it is defined in, relative to the project root."""
    argv: list[str]
    """What oct_run runs, from the folder `path` names."""
    description: str | None = None
    command: str | None = None
    """What the task runs, as its file writes it (a script's command line, an entry point)."""


class TaskFileProblem(BaseModel):
    file: str
    problem: str


class ListTasksOutput(BaseModel):
    folder: str
    tasks: list[ProjectTask]
    total: int
    """Tasks found in all; more than `tasks` when the result was cut (see next_offset)."""
    files: list[str]
    """The task files read."""
    problems: list[TaskFileProblem]
    """Files that were found but not read, or read only in part, and why."""
    next_offset: int | None = None


@dataclass(frozen=True, slots=True)
class _TaskFile:
    name: str
    read: Callable[[str], list[Task]]
    partial_read: bool = False
    """Read its first TASK_FILE_MAX_BYTES when larger (a line-based format), not skipped."""


def _pyproject(source: str) -> list[Task]:
    document = read_toml(source)
    tool = document.get("tool")
    tool = tool if isinstance(tool, Mapping) else {}
    tasks = pyproject_tasks(document)
    hatch = tool.get("hatch")
    envs = hatch.get("envs") if isinstance(hatch, Mapping) else None
    if isinstance(envs, Mapping):
        tasks += hatch_tasks(envs)
    tasks += pdm_tasks(document)
    tox = tool.get("tox")
    if isinstance(tox, Mapping):
        tasks += tox_toml_tasks(tox)
    return tasks


def _hatch_toml(source: str) -> list[Task]:
    envs = read_toml(source).get("envs")
    return hatch_tasks(envs) if isinstance(envs, Mapping) else []


def _tox_toml(source: str) -> list[Task]:
    return tox_toml_tasks(read_toml(source))


_TASK_FILES: Final = (
    _TaskFile("noxfile.py", nox_tasks),
    _TaskFile("tox.ini", tox_ini_tasks),
    _TaskFile("tox.toml", _tox_toml),
    _TaskFile("Makefile", make_tasks, partial_read=True),
    _TaskFile("pyproject.toml", _pyproject),
    _TaskFile("hatch.toml", _hatch_toml),
    _TaskFile("package.json", npm_tasks),
)


def _read_text(workspace: Workspace, path: str, partial_read: bool) -> tuple[str, bool]:
    """The file's text, and whether it was cut at TASK_FILE_MAX_BYTES.

    Raises:
        TaskFileError: Too large, not UTF-8, or not a regular file inside the project.
    """
    try:
        fd = workspace.open_regular_file(path)
    except OctError as exc:
        raise TaskFileError(exc.message) from None
    try:
        data = read_at_most(fd, TASK_FILE_MAX_BYTES, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    cut = len(data) > TASK_FILE_MAX_BYTES
    if cut and not partial_read:
        raise TaskFileError(f"over {TASK_FILE_MAX_BYTES} bytes; not read")
    data = data[:TASK_FILE_MAX_BYTES]
    try:
        text = data.decode("utf-8-sig", errors="strict" if not cut else "ignore")
    except UnicodeDecodeError:
        raise TaskFileError("not UTF-8 text") from None
    return text, cut


def _present(workspace: Workspace, folder: str, name: str) -> str | None:
    """The project-relative path of `name` in `folder` when something is there; Makefiles as make picks."""
    names = _MAKEFILES if name == "Makefile" else (name,)
    for candidate in names:
        relative = candidate if folder == "." else f"{folder}/{candidate}"
        if os.path.lexists(os.path.join(workspace.root, relative)):
            return relative
    return None


def find_tasks(
    workspace: Workspace, folder: str, deadline: Deadline | None = None
) -> tuple[list[ProjectTask], list[str], list[TaskFileProblem]]:
    """Every task of the task files in `folder` (project-relative), the files read, and the problems."""
    tasks: list[ProjectTask] = []
    files: list[str] = []
    problems: list[TaskFileProblem] = []
    for task_file in _TASK_FILES:
        if deadline is not None:
            deadline.check()
        path = _present(workspace, folder, task_file.name)
        if path is None:
            continue
        try:
            text, cut = _read_text(workspace, path, task_file.partial_read)
            found = task_file.read(text)
        except TaskFileError as exc:
            problems.append(TaskFileProblem(file=path, problem=str(exc)))
            continue
        files.append(path)
        if cut:
            problems.append(
                TaskFileProblem(
                    file=path, problem=f"over {TASK_FILE_MAX_BYTES} bytes; only its start was read"
                )
            )
        named = [task for task in found if is_task_name(task.name)]
        if len(named) < len(found):
            problems.append(
                TaskFileProblem(
                    file=path,
                    problem=f"{len(found) - len(named)} task name(s) left out: a name must be letters, "
                    "digits and _ . : + @ / -, not start with -, and have at most "
                    f"{NAME_MAX_LENGTH} characters",
                )
            )
        seen = {(task.runner, task.name) for task in tasks}
        for task in named:
            if (task.runner, task.name) in seen:
                continue
            if len(tasks) >= TASKS_MAX:
                problems.append(
                    TaskFileProblem(file=path, problem=f"more than {TASKS_MAX} tasks; the rest left out")
                )
                break
            seen.add((task.runner, task.name))
            tasks.append(
                ProjectTask(
                    name=task.name,
                    runner=task.runner,
                    source=path,
                    argv=list(task.argv),
                    description=task.description,
                    command=task.command,
                )
            )
    return tasks, files, problems


def list_tasks(workspace: Workspace, params: ListTasksParams, deadline: Deadline | None = None) -> ToolResult:
    """The named tasks of the task files in a project folder, a page of them within the budget.

    Raises:
        NotFoundError: No folder at the path.
        PathRefusedError: The path is not a folder.
    """
    resolved = workspace.contain(params.path)
    if not resolved.exists():
        raise NotFoundError("no folder at that path in the project")
    if not resolved.is_dir():
        raise PathRefusedError("the path is not a folder; give the folder that holds the task files")
    folder = workspace.relative(resolved)
    tasks, files, problems = find_tasks(workspace, folder, deadline)
    shown, next_offset = page(tasks, params.offset, params.max_chars)
    output = ListTasksOutput(
        folder=folder, tasks=shown, total=len(tasks), files=files, problems=problems, next_offset=next_offset
    )
    return ToolResult(
        text=_listing(output),
        structured=output.model_dump(exclude_none=True),
        truncated=next_offset is not None,
    )


def _listing(output: ListTasksOutput) -> str:
    where = "the project root" if output.folder == "." else output.folder
    if not output.tasks and not output.problems:
        return f"no task files in {where} ({', '.join(task_file.name for task_file in _TASK_FILES)})"
    lines = [f"{output.total} task(s) in {where}, from {', '.join(output.files) or 'no readable file'}:"]
    for task in output.tasks:
        about = f"  {task.description}" if task.description else ""
        lines.append(f"  {' '.join(task.argv)}  ({task.source}){about}")
    if output.next_offset is not None:
        lines.append(
            f"[cut: {output.total - output.next_offset} more; call again with offset={output.next_offset}]"
        )
    lines += [f"problem: {problem.file}: {problem.problem}" for problem in output.problems]
    return "\n".join(lines)


def _plan_list_tasks(params: ListTasksParams, env: ToolEnv) -> InProcessPlan:
    return InProcessPlan(partial(list_tasks, env.workspace, params, env.deadline))


LIST_TASKS: Final = ToolSpec(
    name="oct_list_tasks",
    title="List the project's tasks",
    description=(
        "List the project's named tasks (nox, tox, Makefile, console, hatch, pdm and npm scripts), read "
        "without running code, each with the argv to give oct_run."
    ),
    params=ListTasksParams,
    output=ListTasksOutput,
    risk=Risk.READ,
    plan=_plan_list_tasks,
)
