"""oct_list_tasks: each task file's reader on ordinary and odd inputs, and the tool over a folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.errors import NotFoundError, PathRefusedError
from oct_mcp.tools._project.task_files import (
    EXPANSION_MAX,
    Task,
    TaskFileError,
    expand_generative,
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
from oct_mcp.tools.tasks import TASK_FILE_MAX_BYTES, TASKS_MAX, ListTasksParams, list_tasks
from oct_mcp.workspace import Workspace

FIXTURE = Path(__file__).parent.parent / "data" / "projects" / "tasks"


def _names(tasks: list[Task]) -> list[str]:
    return [task.name for task in tasks]


# -- nox ------------------------------------------------------------------------------------------


def test_nox_sessions_are_read_from_their_decorators_with_name_python_and_docstring() -> None:
    source = (
        "import nox as n\n"
        "from nox import session\n"
        "PY = ['3.11', '3.12']\n"
        "@n.session(python=PY)\n"
        "def tests(s):\n    '''Run the tests.\n\n    More.'''\n"
        "@n.session(name='docs-live', py='3.12')\n"
        "def docs(s): ...\n"
        "@session\n"
        "async def lint(s): ...\n"
        "@n.session(name=computed())\n"
        "def fallback(s): ...\n"
        "@n.parametrize('x', [1])\n"
        "def not_a_session(s): ...\n"
    )

    tasks = nox_tasks(source)

    assert tasks == [
        Task("nox", "tests", ("nox", "-s", "tests"), "Run the tests. (python 3.11, 3.12)"),
        Task("nox", "docs-live", ("nox", "-s", "docs-live"), "python 3.12"),
        Task("nox", "lint", ("nox", "-s", "lint")),
        Task("nox", "fallback", ("nox", "-s", "fallback")),
    ]


def test_a_session_decorator_of_another_module_named_session_is_not_a_nox_session() -> None:
    source = "import other\n@other.session\ndef a(s): ...\n@session\ndef b(s): ...\n"

    assert nox_tasks(source) == []


def test_a_noxfile_is_parsed_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"import nox\nopen({str(marker)!r}, 'w').write('x')\n@nox.session\ndef a(s): ...\n"

    assert _names(nox_tasks(source)) == ["a"]
    assert not marker.exists()


@pytest.mark.parametrize(
    "source",
    [
        "def broken(:\n",
        "x = 1\x00\n",
        "(" * 300 + ")" * 300,
        "x = " + "-" * 200_000 + "1\n",
        "[" * 100_000,
    ],
    ids=["syntax", "null byte", "nested parentheses", "long unary chain", "unclosed brackets"],
)
def test_a_noxfile_that_does_not_parse_is_a_file_error(source: str) -> None:
    with pytest.raises(TaskFileError):
        nox_tasks(source)


# -- tox ------------------------------------------------------------------------------------------


def test_tox_ini_lists_env_list_then_the_other_testenv_sections_expanded() -> None:
    source = (
        "[tox]\nenvlist =\n    py{311,312}-django{42,50}\n    lint  # the linters\n\n"
        "[testenv:lint]\ndescription = run %(linters)s\n\n"
        "[testenv:{docs,docs-live}]\ndescription = the docs\n"
    )

    tasks = tox_ini_tasks(source)

    assert [(task.name, task.description) for task in tasks] == [
        ("py311-django42", None),
        ("py311-django50", None),
        ("py312-django42", None),
        ("py312-django50", None),
        ("lint", "run %(linters)s"),
        ("docs", "the docs"),
        ("docs-live", "the docs"),
    ]
    assert tasks[0].argv == ("tox", "-e", "py311-django42")


@pytest.mark.parametrize(
    "source", ["no section header\n", "[tox\nenvlist = a\n", "[tox]\n  indented = first\n x"]
)
def test_a_tox_ini_that_is_no_ini_file_is_a_file_error(source: str) -> None:
    with pytest.raises(TaskFileError):
        tox_ini_tasks(source)


def test_tox_toml_reads_env_list_and_env_tables_and_a_legacy_ini_string() -> None:
    native = {"env_list": ["3.13", "lint"], "env": {"lint": {"description": "ruff"}, "type": {}}}
    legacy = {"legacy_tox_ini": "[tox]\nenv_list = a, b\n"}

    assert [(t.name, t.description) for t in tox_toml_tasks(native)] == [
        ("3.13", None),
        ("lint", "ruff"),
        ("type", None),
    ]
    assert _names(tox_toml_tasks(legacy)) == ["a", "b"]


def test_generative_names_expand_ranges_and_stop_at_the_bound() -> None:
    assert expand_generative("py3{10-12}") == ["py310", "py311", "py312"]
    assert expand_generative("a{1,2}-{x,y}") == ["a1-x", "a1-y", "a2-x", "a2-y"]
    assert expand_generative("broken{a,b") == ["broken{a,b"]
    assert len(expand_generative("{0-9999}{0-9999}{0-9999}")) == EXPANSION_MAX


# -- make -----------------------------------------------------------------------------------------


def test_makefile_targets_skip_patterns_variables_specials_and_definitions() -> None:
    source = (
        ".PHONY: check .venv-ready\n"
        "PY ?= python3\n"
        "SRC := a.c \\\n   b.c\n"
        "X ::= 1\n"
        "Y = a:b\n"
        "export Z = 1\n"
        "check: build lint ## Run every check\n"
        "\tpytest\n"
        "build lint::\n"
        "\tmake -C sub\n"
        "%.o: %.c\n\tcc $<\n"
        "$(OUT): x\n"
        "check: VERBOSE = 1\n"
        ".SUFFIXES:\n"
        ".c.o:\n"
        ".venv-ready:\n"
        ".hidden:\n"
        "define RECIPE\n"
        "inside: nothing\n"
        "endef\n"
        "ifeq ($(A),b)\n"
        "later: ; echo later\n"
        "endif\n"
        "multi: \\\n  a b\n"
        "\tnot-a-target: recipe\n"
    )

    tasks = make_tasks(source)

    assert [(task.name, task.description) for task in tasks] == [
        ("check", "Run every check"),
        ("build", None),
        ("lint", None),
        (".venv-ready", None),
        ("later", None),
        ("multi", None),
    ]
    assert tasks[0].argv == ("make", "check")


@given(st.text(max_size=400))
def test_any_text_read_as_a_makefile_gives_tasks_whose_argv_is_make_and_the_name(source: str) -> None:
    for task in make_tasks(source):
        assert task.argv == ("make", task.name)
        assert "%" not in task.name
        assert "$" not in task.name
        assert "=" not in task.name


# -- pyproject, hatch, pdm, npm --------------------------------------------------------------------


def test_pyproject_console_scripts_hatch_and_pdm_scripts() -> None:
    document = read_toml(
        '[project.scripts]\ndemo = "demo.cli:main"\n'
        '[tool.poetry.scripts]\nold = { callable = "demo.old:main" }\n'
        '[tool.hatch.envs.default.scripts]\ntest = "pytest {args}"\n'
        '[tool.hatch.envs.lint.scripts]\ncheck = ["ruff check", "mypy ."]\n'
        '[tool.pdm.scripts]\n_ = { env_file = ".env" }\n'
        'serve = { cmd = ["python", "-m", "demo"], help = "Serve it" }\n'
        'fmt = "ruff format"\n'
        'all = { composite = ["fmt", "serve"] }\n'
    )

    scripts = pyproject_tasks(document)
    hatch = hatch_tasks(document["tool"]["hatch"]["envs"])
    pdm = pdm_tasks(document)

    assert scripts == [
        Task("script", "demo", ("demo",), "console script", "demo.cli:main"),
        Task("script", "old", ("old",), "console script", "demo.old:main"),
    ]
    assert hatch == [
        Task("hatch", "test", ("hatch", "run", "test"), None, "pytest {args}"),
        Task("hatch", "lint:check", ("hatch", "run", "lint:check"), None, "ruff check && mypy ."),
    ]
    assert pdm == [
        Task("pdm", "serve", ("pdm", "run", "serve"), "Serve it", "python -m demo"),
        Task("pdm", "fmt", ("pdm", "run", "fmt"), None, "ruff format"),
        Task("pdm", "all", ("pdm", "run", "all"), None, "fmt serve"),
    ]


def test_tables_of_the_wrong_type_give_no_tasks_rather_than_an_error() -> None:
    document = read_toml('project = "x"\n[tool]\npdm = 3\nhatch = []\n')

    assert (pyproject_tasks(document), pdm_tasks(document), hatch_tasks({"default": 1})) == ([], [], [])


@pytest.mark.parametrize(
    "source", ["[project\n", "a = 1\na = 2\n", "x = " + "[" * 50_000 + "]" * 50_000 + "\n"]
)
def test_a_pyproject_that_is_not_toml_is_a_file_error(source: str) -> None:
    with pytest.raises(TaskFileError):
        read_toml(source)


def test_package_json_scripts_keep_string_commands_only() -> None:
    source = json.dumps({"scripts": {"build": "tsc -p .", "weird": ["x"], "pre:test": "echo\nhi"}})

    assert npm_tasks(source) == [
        Task("npm", "build", ("npm", "run", "build"), None, "tsc -p ."),
        Task("npm", "pre:test", ("npm", "run", "pre:test"), None, "echo hi"),
    ]


@pytest.mark.parametrize(
    "source", ["{", "[1, 2]", "[" * 100_000 + "]" * 100_000, '{"a": ' + "1" * 5_000 + "}"]
)
def test_a_package_json_that_is_no_json_object_is_a_file_error(source: str) -> None:
    with pytest.raises(TaskFileError):
        npm_tasks(source)


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("check", True),
        ("test:unit", True),
        ("py311-django42", True),
        (".venv", True),
        ("-e", False),
        ("--eval=x", False),
        ("a b", False),
        ("a=b", False),
        ("$(X)", False),
        ("", False),
        ("a" * 129, False),
        ("a\nb", False),
    ],
)
def test_a_task_name_is_safe_as_an_argument_only_when_plain(name: str, safe: bool) -> None:
    assert is_task_name(name) is safe


# -- the tool -------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "project"
    shutil.copytree(FIXTURE, root)
    return root


def test_the_fixture_project_lists_every_kind_of_task_with_its_source_and_argv(project: Path) -> None:
    result = list_tasks(Workspace(project), ListTasksParams())

    assert result.structured is not None
    listed = [(task["source"], task["argv"]) for task in result.structured["tasks"]]
    assert listed == [
        ("noxfile.py", ["nox", "-s", "tests"]),
        ("noxfile.py", ["nox", "-s", "docs-live"]),
        ("noxfile.py", ["nox", "-s", "lint"]),
        ("tox.ini", ["tox", "-e", "py311"]),
        ("tox.ini", ["tox", "-e", "py312"]),
        ("tox.ini", ["tox", "-e", "lint"]),
        ("tox.ini", ["tox", "-e", "docs"]),
        ("Makefile", ["make", "check"]),
        ("Makefile", ["make", "build"]),
        ("Makefile", ["make", "clean"]),
        ("Makefile", ["make", ".venv-check"]),
        ("Makefile", ["make", "dist/demo.tar.gz"]),
        ("pyproject.toml", ["tasks-demo"]),
        ("pyproject.toml", ["hatch", "run", "test"]),
        ("pyproject.toml", ["hatch", "run", "lint:check"]),
        ("pyproject.toml", ["pdm", "run", "serve"]),
        ("pyproject.toml", ["pdm", "run", "fmt"]),
        ("package.json", ["npm", "run", "build"]),
        ("package.json", ["npm", "run", "test:unit"]),
    ]
    assert result.structured["problems"] == []
    assert not (project / "NOXFILE_WAS_RUN").exists()


def test_a_malformed_file_is_a_problem_and_the_other_files_are_still_read(project: Path) -> None:
    (project / "package.json").write_text("{ not json")
    (project / "tox.ini").write_bytes(b"[tox]\nenv_list = \xff\n")

    result = list_tasks(Workspace(project), ListTasksParams())

    assert result.structured is not None
    assert result.is_error is False
    assert result.structured["problems"] == [
        {"file": "tox.ini", "problem": "not UTF-8 text"},
        {"file": "package.json", "problem": "not valid JSON (line 1)"},
    ]
    assert {task["runner"] for task in result.structured["tasks"]} == {
        "nox",
        "make",
        "script",
        "hatch",
        "pdm",
    }


def test_an_oversized_file_is_not_read_and_an_oversized_makefile_only_in_part(project: Path) -> None:
    (project / "package.json").write_text(json.dumps({"scripts": {"a": "x" * TASK_FILE_MAX_BYTES}}))
    with (project / "Makefile").open("a") as makefile:
        makefile.write("# padding\n" * (TASK_FILE_MAX_BYTES // 10 + 1) + "past-the-limit:\n")

    result = list_tasks(Workspace(project), ListTasksParams())

    assert result.structured is not None
    problems = {problem["file"]: problem["problem"] for problem in result.structured["problems"]}
    assert problems == {
        "Makefile": f"over {TASK_FILE_MAX_BYTES} bytes; only its start was read",
        "package.json": f"over {TASK_FILE_MAX_BYTES} bytes; not read",
    }
    names = [task["name"] for task in result.structured["tasks"]]
    assert "check" in names
    assert "past-the-limit" not in names


def test_a_task_file_that_is_a_symlink_out_of_the_project_or_a_fifo_is_a_problem(
    project: Path, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere.json").write_text('{"scripts": {"stolen": "x"}}')
    (project / "package.json").unlink()
    (project / "package.json").symlink_to(tmp_path / "elsewhere.json")
    (project / "tox.ini").unlink()
    os.mkfifo(project / "tox.ini")

    result = list_tasks(Workspace(project), ListTasksParams())

    assert result.structured is not None
    assert [problem["file"] for problem in result.structured["problems"]] == ["tox.ini", "package.json"]
    assert "stolen" not in json.dumps(result.structured)


def test_gnu_make_s_own_name_is_read_before_makefile(project: Path) -> None:
    (project / "GNUmakefile").write_text("gnu-only:\n\ttrue\n")

    result = list_tasks(Workspace(project), ListTasksParams())

    assert result.structured is not None
    make = [task for task in result.structured["tasks"] if task["runner"] == "make"]
    assert [(task["source"], task["name"]) for task in make] == [("GNUmakefile", "gnu-only")]


def test_a_sub_folder_lists_its_own_tasks_with_paths_from_the_root(project: Path) -> None:
    (project / "web").mkdir()
    (project / "web" / "package.json").write_text('{"scripts": {"dev": "vite"}}')

    result = list_tasks(Workspace(project), ListTasksParams(path="web"))

    assert result.structured is not None
    assert (result.structured["folder"], result.structured["files"]) == ("web", ["web/package.json"])
    assert result.structured["tasks"] == [
        {
            "name": "dev",
            "runner": "npm",
            "source": "web/package.json",
            "argv": ["npm", "run", "dev"],
            "command": "vite",
        }
    ]


def test_a_folder_without_task_files_says_so(tmp_path: Path) -> None:
    result = list_tasks(Workspace(tmp_path.resolve()), ListTasksParams())

    assert result.structured is not None
    assert (result.structured["tasks"], result.structured["files"], result.structured["total"]) == ([], [], 0)
    assert result.text.startswith("no task files in the project root")


def test_a_path_that_is_a_file_or_missing_is_refused(project: Path) -> None:
    workspace = Workspace(project)

    with pytest.raises(PathRefusedError) as refused:
        list_tasks(workspace, ListTasksParams(path="tox.ini"))
    with pytest.raises(NotFoundError) as missing:
        list_tasks(workspace, ListTasksParams(path="nowhere"))

    assert (refused.value.code, missing.value.code) == (PathRefusedError.code, NotFoundError.code)


def test_a_long_listing_is_paged_within_the_budget_and_the_pages_hold_every_task(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    lines = [f"target-{n:04}: ## the target numbered {n}\n" for n in range(600)]
    (root / "Makefile").write_text("".join(lines))
    workspace = Workspace(root)
    names: list[str] = []
    sizes: list[int] = []
    offset: int | None = 0

    while offset is not None and len(sizes) < 100:
        result = list_tasks(workspace, ListTasksParams(max_chars=5_000, offset=offset))
        assert result.structured is not None
        names += [task["name"] for task in result.structured["tasks"]]
        sizes.append(len(json.dumps(result.structured, separators=(",", ":"))))
        offset = result.structured.get("next_offset")

    assert names == [f"target-{n:04}" for n in range(600)]
    assert max(sizes) <= 5_000


_TEXT_READERS = {
    "noxfile.py": nox_tasks,
    "tox.ini": tox_ini_tasks,
    "Makefile": make_tasks,
    "package.json": npm_tasks,
    "pyproject.toml": lambda text: pyproject_tasks(read_toml(text)),
}
_SHAPED_TEXT = st.lists(
    st.sampled_from(
        [
            "[tox]",
            "[testenv:a{1,2}]",
            "env_list = x, {y",
            '"scripts": {',
            "}",
            "@nox.session(name=1)",
            "def f(s): ...",
            "import nox",
            "[project.scripts]",
            'a = "b"',
            "a: b ## c",
            "\t",
            "\\",
            "=",
            "%",
            "\x00",
        ]
    )
    | st.text(max_size=20),
    max_size=30,
).map("\n".join)


@pytest.mark.parametrize("reader", sorted(_TEXT_READERS))
@given(source=_SHAPED_TEXT)
def test_any_text_gives_tasks_or_a_file_error_never_another_exception(reader: str, source: str) -> None:
    try:
        tasks = _TEXT_READERS[reader](source)
    except TaskFileError:
        return
    assert all(isinstance(task, Task) and task.argv[-1] == task.name for task in tasks)


@pytest.mark.parametrize(
    "source",
    [
        "a" + " " * 400_000,
        "a" + " " * 400_000 + "b",
        "a:" + " " * 400_000 + "=",
        "export " * 60_000,
        "x \\\n" * 100_000,
    ],
    ids=["spaces", "spaces between words", "spaces before an equals", "repeated export", "continuations"],
)
def test_a_makefile_of_long_hostile_lines_is_read_in_one_pass(source: str) -> None:
    assert len(make_tasks(source)) <= 2


def test_a_generative_env_list_of_any_size_is_cut_at_the_bound() -> None:
    source = "[tox]\nenv_list = " + ", ".join(f"e{k}-{{0-9999}}-{{a,b,c,d}}" for k in range(1_000)) + "\n"

    tasks = tox_ini_tasks(source)

    assert len(tasks) == TASKS_MAX + 1


def test_more_tasks_than_the_bound_are_cut_with_a_problem(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "Makefile").write_text("".join(f"t{n}:\n" for n in range(3 * TASKS_MAX)))

    result = list_tasks(Workspace(root), ListTasksParams(max_chars=1_000))

    assert result.structured is not None
    assert result.structured["total"] == TASKS_MAX
    assert result.structured["problems"] == [
        {"file": "Makefile", "problem": f"more than {TASKS_MAX} tasks; the rest left out"}
    ]
