"""The files a read shows masked: found with a cache that rereads only what changed, and kept from
the code a command runs by every name and move, on each backend that confines reads."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from command_tool import command_sandbox, run_command
from optional import bubblewrap, landlock

from oct_mcp.backends import Backend, SecretFileView, secret_files
from oct_mcp.backends.sandbox_exec import seatbelt_profile
from oct_mcp.backends.secret_files import SCAN_MAX_BYTES, SecretFileCache, masked_copies
from oct_mcp.redaction import redact
from oct_mcp.tools.files import LINE_RANGE_SCAN_LIMIT
from oct_mcp.types import ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


SECRET = "Xk9vR2mQ7pL4sT8wZ3nB"  # noqa: S105 - a test secret
ENV = f"DB_PASSWORD={SECRET}\n"
GIT_CONFIG = '[remote "origin"]\n\turl = https://alice:Zq8vR2mK9xL4pT7w@github.com/team/app.git\n'
PIP_CONF = "[global]\nindex-url = https://ci:Zq8vR2mK9xL4pT7w@pypi.example.com/simple\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "project"
    (root / "src").mkdir(parents=True)
    (root / ".env").write_text(ENV)
    (root / "src" / "app.py").write_text("print('hello')\n")
    (root / "README.md").write_text("# app\n")
    return root


def _names(cache: SecretFileCache, root: Path) -> list[str]:
    return [str(path.relative_to(root)) for path in cache.find(root).files]


def test_a_file_a_read_shows_masked_is_found_and_a_clean_one_is_not(project: Path) -> None:
    assert _names(SecretFileCache(), project) == [".env"]


def test_a_warm_find_reads_only_the_files_that_changed(project: Path) -> None:
    cache = SecretFileCache()
    first = cache.find(project)

    warm = cache.find(project)
    (project / "src" / "app.py").write_text(f"TOKEN = 'x'\nAPI_KEY = '{SECRET}'\n")
    changed = cache.find(project)

    assert (first.scanned, warm.scanned, changed.scanned) == (3, 0, 1)
    assert [str(p.relative_to(project)) for p in changed.files] == [".env", "src/app.py"]


def test_a_git_config_with_a_token_in_its_remote_url_is_found_and_git_objects_are_not_read(
    project: Path,
) -> None:
    (project / ".git" / "objects" / "ab").mkdir(parents=True)
    (project / ".git" / "config").write_text(GIT_CONFIG)
    # A loose object is zlib-compressed: no read shows it as text; this one is plain to prove it is not read.
    (project / ".git" / "objects" / "ab" / "cdef").write_text(ENV)

    assert _names(SecretFileCache(), project) == [".env", ".git/config"]


def test_an_environment_folders_own_files_are_read_and_its_packages_are_not(project: Path) -> None:
    package = project / ".venv" / "lib" / "python3.11" / "site-packages" / "lib_with_fixtures"
    package.mkdir(parents=True)
    (project / ".venv" / "pip.conf").write_text(PIP_CONF)
    (package / "fake_keys.env").write_text(ENV)

    assert _names(SecretFileCache(), project) == [".env", ".venv/pip.conf"]


def test_a_hard_link_where_files_are_not_read_is_found_by_its_inode(project: Path) -> None:
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".git" / "objects" / "ab").mkdir(parents=True)
    os.link(project / ".env", project / ".venv" / "lib" / "other_name")
    os.link(project / ".env", project / ".git" / "objects" / "ab" / "cdef")
    os.link(project / ".env", project / "src" / "copy.txt")

    assert _names(SecretFileCache(), project) == [
        ".env",
        ".git/objects/ab/cdef",
        ".venv/lib/other_name",
        "src/copy.txt",
    ]


def test_other_names_are_searched_for_once_until_the_files_links_change(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".venv").mkdir()
    os.link(project / ".env", tmp_path / "kept_outside.env")
    walks: list[bool] = []
    walk = secret_files._walk

    def counted(root: Path, *, everything: bool = False) -> Iterator[tuple[str, os.stat_result, bool]]:
        walks.append(everything)
        return walk(root, everything=everything)

    monkeypatch.setattr(secret_files, "_walk", counted)
    cache = SecretFileCache()

    cache.find(project)
    cache.find(project)
    os.link(project / ".env", project / ".venv" / "other_name")
    again = cache.find(project)

    # A name outside the project is never found, but a new link changes the file's ctime.
    assert walks == [False, True, False, False, True]
    assert [str(p.relative_to(project)) for p in again.files] == [".env", ".venv/other_name"]


def _git(root: Path, *args: str) -> None:
    who = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    subprocess.run(["git", "-C", str(root), *who, *args], check=True, capture_output=True)


def test_git_objects_holding_a_secret_file_as_it_is_now_are_found_loose_and_packed(project: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "add", "src/app.py")
    _git(project, "commit", "-q", "-m", "clean")
    assert SecretFileCache().find(project).history is None

    _git(project, "add", ".env")
    loose = SecretFileCache().find(project).history
    _git(project, "commit", "-q", "-m", "oops")
    _git(project, "gc", "-q", "--prune=now")
    packed = SecretFileCache().find(project).history

    assert loose == packed == project / ".git" / "objects"
    assert not list((project / ".git" / "objects").glob("??/*"))  # only packs are left


def test_an_older_value_of_a_secret_in_git_objects_is_not_looked_for(project: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "add", ".env")
    _git(project, "commit", "-q", "-m", "oops")
    (project / ".env").write_text("DB_PASSWORD=Zq8vR2mK9xL4pT7wQ1\n")

    # The README's known gap: only the files' values as they are now are looked for.
    assert SecretFileCache().find(project).history is None


def test_links_binaries_and_files_past_the_scan_limit_are_not_read(project: Path) -> None:
    (project / "link").symlink_to(project / ".env")
    (project / "dump.bin").write_bytes(b"\x00" + ENV.encode())
    (project / "big.log").write_text(ENV + "x" * 64)
    cache = SecretFileCache(max_bytes=40)

    # The link reaches the file by its real name, which is found; the big file no read masks.
    assert _names(cache, project) == [".env"]


def test_the_scan_limit_is_the_most_the_read_tools_mask_of_a_file() -> None:
    assert SCAN_MAX_BYTES == LINE_RANGE_SCAN_LIMIT


def test_text_that_is_not_utf8_counts_and_its_copy_keeps_every_byte_but_the_secret(
    project: Path, tmp_path: Path
) -> None:
    (project / ".env").unlink()
    (project / "latin1.env").write_bytes("# café\n".encode("latin-1") + ENV.encode())
    found = SecretFileCache().find(project)

    (copy,) = masked_copies(found, tmp_path)

    assert copy.path == project / "latin1.env"
    assert copy.masked is not None
    assert copy.masked.read_bytes() == "# café\nDB_PASSWORD=[REDACTED:password]\n".encode("latin-1")


def test_masked_copies_hold_what_a_read_shows_owner_only_one_per_inode(project: Path, tmp_path: Path) -> None:
    os.link(project / ".env", project / "src" / "copy.txt")
    found = SecretFileCache().find(project)

    copies = masked_copies(found, tmp_path)

    assert [c.path for c in copies] == [project / ".env", project / "src" / "copy.txt"]
    assert copies[0].masked == copies[1].masked
    masked = copies[0].masked
    assert masked is not None
    assert masked.read_text() == redact(ENV)[0] == "DB_PASSWORD=[REDACTED:password]\n"
    assert stat.S_IMODE(masked.stat().st_mode) == 0o400


def test_the_seatbelt_profile_denies_reading_each_secret_file_last() -> None:
    profile = seatbelt_profile(
        reads=0, protected=0, writable=False, network=False, strict_files=True, secrets=2
    )

    assert profile.splitlines()[-2:] == [
        '(deny file-read-data (subpath (param "SECRET_0")))',
        '(deny file-read-data (subpath (param "SECRET_1")))',
    ]


# -- real runs ----------------------------------------------------------------------------------


async def _run(backend: Backend, project: Path, code: str, *, writes: bool = False) -> ToolResult:
    sandbox = command_sandbox(backend, timeout_seconds=60, threads=1, allow_unconfined=False)
    return await run_command(backend, project, [sys.executable, "-c", code], sandbox=sandbox, writes=writes)


ATTEMPTS = """\
import os
def attempt(name, action):
    try:
        print(f"{name}: {repr(action())[:60]}")
    except (OSError, EOFError, ValueError) as exc:
        print(f"{name}: refused {type(exc).__name__}")
"""


async def test_landlock_keeps_the_file_from_every_name_and_every_move(project: Path) -> None:
    backend = landlock()
    (project / "data").mkdir()
    os.link(project / ".env", project / "data" / "hard_link")
    (project / "link").symlink_to(".env")
    code = ATTEMPTS + (
        "attempt('env', lambda: open('.env').read())\n"
        "attempt('hard link', lambda: open('data/hard_link').read())\n"
        "attempt('symlink', lambda: open('link').read())\n"
        "attempt('via proc', lambda: open('/proc/self/cwd/.env').read())\n"
        "attempt('rename', lambda: os.rename('data/hard_link', 'data/moved'))\n"
        "attempt('moved', lambda: open('data/moved').read())\n"
        "attempt('link into src', lambda: os.link('data/hard_link', 'src/linked'))\n"
        "attempt('sibling', lambda: open('src/app.py').read())\n"
        "attempt('listing', lambda: sorted(os.listdir('.')))\n"
    )

    result = await _run(backend, project, code, writes=True)

    lines = dict(line.split(": ", 1) for line in result.text.splitlines() if ": " in line)
    assert SECRET not in result.text
    assert lines["env"] == "refused PermissionError"
    assert lines["hard link"] == "refused PermissionError"
    assert lines["symlink"] == "refused PermissionError"
    assert lines["via proc"] == "refused PermissionError"
    # The move is the run's to make in a folder it may write; the file stays unreadable under its new name.
    assert lines["rename"] == "None"
    assert lines["moved"] == "refused PermissionError"
    # A link where reads are allowed would give the file a right it had not: Landlock refuses it.
    assert lines["link into src"].startswith("refused")
    assert lines["sibling"] == "\"print('hello')\\n\""
    assert "'.env'" in lines["listing"]
    assert (project / ".env").read_text() == ENV


async def test_landlock_keeps_a_secret_file_inside_the_projects_own_venv(project: Path) -> None:
    backend = landlock()
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (project / ".venv" / "pip.conf").write_text(PIP_CONF)
    code = ATTEMPTS + "attempt('pip.conf', lambda: open('.venv/pip.conf').read())\n"

    result = await _run(backend, project, code)

    assert "pip.conf: refused PermissionError" in result.text
    assert "Zq8vR2mK9xL4pT7w" not in result.text


async def test_bubblewrap_shows_the_masked_copy_which_a_writable_run_cannot_change(project: Path) -> None:
    backend = bubblewrap()
    assert backend.secret_files is SecretFileView.MASKED
    code = ATTEMPTS + (
        "attempt('read', lambda: open('.env').read())\n"
        "attempt('write', lambda: open('.env', 'w').write('x'))\n"
        "attempt('remove', lambda: os.remove('.env'))\n"
        "attempt('rename', lambda: os.rename('.env', 'src/env'))\n"
        "attempt('other', lambda: open('src/new.txt', 'w').write('fine'))\n"
    )

    result = await _run(backend, project, code, writes=True)

    assert result.text.splitlines()[:5] == [
        "read: 'DB_PASSWORD=[REDACTED:password]\\n'",
        "write: refused OSError",
        "remove: refused OSError",
        "rename: refused OSError",
        "other: 4",
    ]
    assert (project / ".env").read_text() == ENV
    assert "1 file(s) holding secrets were shown to the run masked" in result.text


@pytest.mark.parametrize("name", ["bubblewrap", "landlock"])
async def test_bytecode_a_terminal_run_left_of_a_secret_source_is_kept_from_the_run(
    project: Path, name: str
) -> None:
    backend = bubblewrap() if name == "bubblewrap" else landlock()
    source = project / "settings.py"
    source.write_text(f'DB_PASSWORD = "{SECRET}"\n')
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), doraise=True)
    code = ATTEMPTS + (
        "import glob, marshal\n"
        "pyc = glob.glob('__pycache__/settings.*.pyc')[0]\n"
        "constants = lambda: marshal.loads(open(pyc, 'rb').read()[16:]).co_consts\n"
        "attempt('bytecode', lambda: [c[::-1] for c in constants()])\n"
        "attempt('import', lambda: __import__('settings').DB_PASSWORD)\n"
    )

    result = await _run(backend, project, code)

    assert SECRET not in result.text
    assert SECRET[::-1] not in result.text
    lines = dict(line.split(": ", 1) for line in result.text.splitlines() if ": " in line)
    if name == "bubblewrap":
        # Shown empty: no constants; an import compiles the masked source.
        assert lines["bytecode"] == "refused EOFError"
        assert lines["import"] == "'[REDACTED:password]'"
    else:
        assert lines["bytecode"] == "refused PermissionError"
        assert lines["import"] == "refused PermissionError"
