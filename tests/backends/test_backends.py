"""Backends as argv builders: bubblewrap binds, Seatbelt parameters, the environment, the limits."""

from __future__ import annotations

import os
import resource
import sys
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import MAX_PROTECTED_MOUNTS, Bubblewrap
from oct_mcp.backends.confined import start_confined
from oct_mcp.backends.environment import is_never_passed, sandbox_environment
from oct_mcp.backends.installs import install_roots
from oct_mcp.backends.native import Native
from oct_mcp.backends.private_network import make_private_network
from oct_mcp.backends.rlimits import limit_prefix
from oct_mcp.backends.sandbox_exec import SandboxExec, seatbelt_profile
from oct_mcp.backends.selection import probe_backends, select_backend
from oct_mcp.errors import ConfigError, InstallRefusedError, SandboxUnavailableError

pytestmark = pytest.mark.e2e

LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=65)


def _request(tmp_path: Path, **changes: object) -> SandboxRequest:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    fields: dict[str, object] = {
        "argv": ("/usr/bin/true",),
        "project": project,
        "writable": False,
        "network": False,
        "protected": (),
        "read_only_binds": (),
        "env": {"PATH": "/usr/bin", "HOME": "/home/oct"},
        "limits": LIMITS,
        "scratch": tmp_path,
    }
    fields.update(changes)
    return SandboxRequest(**fields)  # type: ignore[arg-type]


def _pairs(argv: tuple[str, ...], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, arg in enumerate(argv) if arg == flag]


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_never_binds_the_root_and_drops_everything(tmp_path: Path) -> None:
    prepared = Bubblewrap().prepare(_request(tmp_path))
    argv = prepared.argv

    assert ("/", "/") not in _pairs(argv, "--ro-bind") + _pairs(argv, "--bind")
    for flag in ("--die-with-parent", "--new-session", "--unshare-pid", "--unshare-user", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    # A network of its own either way: bubblewrap's, or one the child makes before the exec.
    setup = getattr(prepared.confinement, "child_setup", None)
    if "--unshare-net" not in argv:
        assert isinstance(setup, partial)
        assert setup.func is make_private_network


@pytest.mark.needs_backend("bubblewrap")
def test_a_bubblewrap_run_that_needs_no_localhost_gets_bubblewraps_own_network(tmp_path: Path) -> None:
    prepared = Bubblewrap().prepare(_request(tmp_path, resolves_localhost=False))

    assert "--unshare-net" in prepared.argv
    assert getattr(prepared.confinement, "child_setup", None) is None


class _SetupFails:
    """A confinement whose setup in the child fails, as a namespace the kernel refuses does."""

    def restrict_current_thread(self) -> None:
        """No filter: only the child's setup is under test."""

    def child_setup(self) -> None:
        raise PermissionError(13, "Permission denied")

    def end_domain(self, leader: int) -> None:
        """Nothing to sweep."""


@pytest.mark.anyio
async def test_a_run_whose_setup_before_the_exec_fails_never_runs_and_says_why(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    with pytest.raises(SandboxUnavailableError, match="nothing ran") as raised:
        await start_confined(_SetupFails(), ("/usr/bin/touch", str(marker)), {}, tmp_path)

    assert raised.value.code == "sandbox_unavailable"
    assert not marker.exists()


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_binds_a_read_tools_project_read_only(tmp_path: Path) -> None:
    request = _request(tmp_path)

    argv = Bubblewrap().prepare(request).argv

    assert (str(request.project), str(request.project)) in _pairs(argv, "--ro-bind")
    assert _pairs(argv, "--bind") == []


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_keeps_protected_paths_read_only_over_a_writable_project(tmp_path: Path) -> None:
    request = _request(tmp_path, writable=True, protected=(tmp_path / "project" / ".git",))

    argv = Bubblewrap().prepare(request).argv

    project, git = str(request.project), str(request.project / ".git")
    assert _pairs(argv, "--bind") == [(project, project)]
    assert argv.index("--bind") < argv.index(git)
    assert (git, git) in _pairs(argv, "--ro-bind")


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_binds_each_folder_on_the_way_to_a_protected_path_onto_itself(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "vendor" / "lib" / ".git").mkdir(parents=True)
    (project / ".github" / "workflows").mkdir(parents=True)
    protected = (project / ".github" / "workflows", project / "vendor" / "lib" / ".git")
    request = _request(tmp_path, writable=True, protected=protected)

    argv = Bubblewrap().prepare(request).argv

    # A mount point cannot be renamed: none of these folders can be moved away with what it holds.
    folders = [str(project / name) for name in (".github", "vendor", "vendor/lib")]
    assert _pairs(argv, "--bind") == [(str(project), str(project)), *((f, f) for f in folders)]
    assert [pair[0] for pair in _pairs(argv, "--ro-bind")][-2:] == [str(path) for path in protected]


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_mounts_at_most_its_budget_of_protected_paths_the_shallowest_first(tmp_path: Path) -> None:
    project = tmp_path / "project"
    deep = []
    for number in range(MAX_PROTECTED_MOUNTS):
        folder = project / "node_modules" / f"pkg{number}"
        folder.mkdir(parents=True)
        deep.append(folder / ".travis.yml")
    protected = (project / ".git", *deep)
    request = _request(tmp_path, writable=True, protected=protected)

    argv = Bubblewrap().prepare(request).argv

    mounts = _pairs(argv, "--bind")[1:] + _pairs(argv, "--ro-bind")
    shielded = [source for source, _ in mounts if source.startswith(str(project)) and source != str(project)]
    assert MAX_PROTECTED_MOUNTS - 1 <= len(shielded) <= MAX_PROTECTED_MOUNTS
    assert (str(project / ".git"), str(project / ".git")) in _pairs(argv, "--ro-bind")
    assert str(deep[-1]) not in shielded  # left to the check after the run


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_shares_the_network_only_when_the_tool_needs_it(tmp_path: Path) -> None:
    prepared = Bubblewrap().prepare(_request(tmp_path, network=True))

    assert "--unshare-net" not in prepared.argv
    assert "no_network" not in prepared.guarantees


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_sets_the_environment_inside_and_passes_none_outside(tmp_path: Path) -> None:
    prepared = Bubblewrap().prepare(_request(tmp_path))

    assert prepared.env == {}
    assert _pairs(prepared.argv, "--setenv") == [("PATH", "/usr/bin"), ("HOME", "/home/oct")]


@pytest.mark.needs_backend("bubblewrap")
def test_bubblewrap_shows_strict_profiles_only_the_system_files_tools_need(tmp_path: Path) -> None:
    argv = Bubblewrap().prepare(_request(tmp_path, strict_files=True)).argv

    assert ("/etc", "/etc") not in _pairs(argv, "--ro-bind")
    assert ("/etc/passwd", "/etc/passwd") in _pairs(argv, "--ro-bind-try")
    assert all("shadow" not in source for source, _ in _pairs(argv, "--ro-bind-try"))


@given(path=st.text(min_size=1, max_size=40).filter(lambda p: "\x00" not in p))
def test_seatbelt_profile_text_never_contains_a_path(path: str) -> None:
    profile = seatbelt_profile(reads=2, protected=3, writable=True, network=False, strict_files=True)

    assert '(param "PROJECT")' in profile
    assert '(require-not (subpath (param "PROTECTED_2")))' in profile
    assert "(allow network" not in profile
    assert f'"{path}"' not in profile or path in (
        "/System",
        "/usr",
        "/Library",
        "/private/etc",
        "/dev",
        "/bin",
        "/sbin",
    )


def test_sandbox_exec_passes_every_path_as_a_parameter(tmp_path: Path) -> None:
    request = _request(
        tmp_path, writable=True, protected=(tmp_path / "project" / ".git",), read_only_binds=(tmp_path,)
    )

    prepared = SandboxExec().prepare(request)

    profile = prepared.argv[prepared.argv.index("-p") + 1]
    definitions = [prepared.argv[i + 1] for i, arg in enumerate(prepared.argv) if arg == "-D"]
    assert str(tmp_path) not in profile
    assert f"PROJECT={request.project.resolve()}" in definitions
    assert f"PROTECTED_0={(request.project / '.git').resolve()}" in definitions


def test_native_confines_nothing_and_says_so(tmp_path: Path) -> None:
    prepared = Native().prepare(_request(tmp_path))

    assert prepared.guarantees == frozenset()
    assert prepared.argv[-1] == "/usr/bin/true"


def test_the_environment_is_built_from_the_allowlist_only() -> None:
    host = {"AWS_SECRET_ACCESS_KEY": "x", "HOME": "/root", "TZ": "Europe/Paris", "PYTHONPATH": "/evil"}

    env = sandbox_environment(
        path_dirs=["/venv/bin", "/usr/bin"],
        home="/home/oct",
        tmpdir="/tmp",
        read_only_project=True,
        threads=2,
        tool_env=[("LD_PRELOAD", "/evil.so"), ("GITHUB_TOKEN", "x"), ("FORCE_COLOR", "0"), ("PATH", "/evil")],
        host=host,
    )

    assert env["PATH"] == os.pathsep.join(["/venv/bin", "/usr/bin"])
    assert env["HOME"] == "/home/oct"
    assert env["TZ"] == "Europe/Paris"
    assert env["RUFF_CACHE_DIR"].startswith("/tmp/")
    assert env["FORCE_COLOR"] == "0"
    assert not {"AWS_SECRET_ACCESS_KEY", "PYTHONPATH", "LD_PRELOAD", "GITHUB_TOKEN"} & set(env)


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "PYTHONSTARTUP",
        "GIT_SSH_COMMAND",
        "AWS_ACCESS_KEY_ID",
        "MY_API_KEY",
        "DB_PASSWORD",
        "SSH_AUTH_SOCK",
    ],
)
def test_hijacks_and_secret_looking_names_are_never_passed(name: str) -> None:
    assert is_never_passed(name) is True


@pytest.mark.parametrize("name", ["FORCE_COLOR", "PYTEST_ADDOPTS_X", "CI", "SOURCE_DATE_EPOCH"])
def test_ordinary_tool_settings_pass(name: str) -> None:
    assert is_never_passed(name) is False


def test_limits_use_rlimit_data_and_no_core_dumps() -> None:
    prefix = limit_prefix(LIMITS)

    if prefix[0].endswith("prlimit"):
        assert f"--data={512 * 1_048_576}" in prefix
        assert "--core=0" in prefix
        assert not any(arg.startswith("--as") for arg in prefix)
    assert prefix[-1] == "--"


def test_limits_never_ask_above_the_servers_hard_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    prefix = limit_prefix(Limits(memory_bytes=None, cpu_seconds=10, open_files=10**9))

    if prefix[0].endswith("prlimit") and hard != resource.RLIM_INFINITY:
        assert f"--nofile={hard}" in prefix


def test_install_roots_of_a_venv_tool_are_the_venv_and_its_python_never_the_home(tmp_path: Path) -> None:
    roots = install_roots(Path(sys.executable).parent / "ruff", tmp_path)

    assert Path(sys.prefix) in roots
    assert all(not Path.home().resolve().is_relative_to(root) for root in roots)
    assert Path("/") not in roots


def test_an_explicit_backend_that_does_not_work_is_an_error_not_a_fallback() -> None:
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        pytest.skip("sandbox_exec works on macOS")
    with pytest.raises(ConfigError) as caught:
        select_backend("sandbox_exec")

    assert "macOS only" in caught.value.message


def test_auto_picks_a_working_backend_and_every_backend_reports_why() -> None:
    backend, availability = select_backend("auto")

    assert availability.usable is True
    reported = dict(probe_backends())
    assert set(reported) == {"bubblewrap", "landlock", "sandbox_exec", "native"}
    assert reported[backend.name].usable is True
    assert all(a.detail for a in reported.values())


def test_install_roots_never_read_the_home_line_of_a_venv_inside_the_project(tmp_path: Path) -> None:
    project = (tmp_path / "project").resolve()
    named = (tmp_path / "named" / "bin").resolve()
    named.mkdir(parents=True)
    (named.parent / "lib" / "python3.11").mkdir(parents=True)
    (named.parent / "lib" / "python3.11" / "os.py").write_text("")
    bin_dir = project / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text(f"home = {named}\n")
    (bin_dir / "python").symlink_to(os.path.realpath(sys.executable))
    (bin_dir / "tool").write_text(f"#!{bin_dir / 'python'}\n")

    roots = install_roots(bin_dir / "tool", project)

    assert named.parent not in roots
    assert roots == (Path(os.path.realpath(sys.executable)).parent.parent,)


def test_a_project_link_into_an_install_outside_shows_only_the_parts_an_interpreter_reads(
    tmp_path: Path,
) -> None:
    # A venv made in place in another folder (`python -m venv .`) holds that folder's other files too.
    other = (tmp_path / "other").resolve()
    (other / "bin").mkdir(parents=True)
    (other / "lib" / "python3.11").mkdir(parents=True)
    (other / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (other / "bin" / "python").write_bytes(b"\x7fELF")
    (other / "bin" / "tool").write_bytes(b"\x7fELF")
    (other / "secret.env").write_text("TOKEN=x\n")
    project = (tmp_path / "project").resolve()
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "pytest").symlink_to(other / "bin" / "tool")

    roots = install_roots(project / ".venv" / "bin" / "pytest", project)

    assert roots == (other / "bin", other / "lib", other / "pyvenv.cfg")
    assert not any((other / "secret.env").is_relative_to(root) for root in roots)


def test_install_roots_of_a_lone_program_on_path_are_the_program_not_its_folder(tmp_path: Path) -> None:
    program = (tmp_path / "tools" / "bin" / "lint").resolve()
    program.parent.mkdir(parents=True)
    program.write_bytes(b"\x7fELF")
    (tmp_path / "tools" / "credentials.toml").write_text("token = x\n")

    roots = install_roots(program, (tmp_path / "project").resolve())

    assert roots == (program,)


def test_install_roots_refuse_a_program_in_a_secret_folder_of_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = (tmp_path / "home").resolve()
    program = home / ".ssh" / "bin" / "tool"
    program.parent.mkdir(parents=True)
    program.write_bytes(b"\x7fELF")
    monkeypatch.setenv("HOME", str(home))

    with pytest.raises(InstallRefusedError):
        install_roots(program, (tmp_path / "project").resolve())


def test_install_roots_refuse_a_python_install_planted_in_a_folder_writable_by_all(tmp_path: Path) -> None:
    # /tmp is one: other users' sockets live there, and anyone can plant lib/python3.x/os.py in it.
    shared = (tmp_path / "shared").resolve()
    (shared / "lib" / "python3.11").mkdir(parents=True)
    (shared / "lib" / "python3.11" / "os.py").write_text("")
    (shared / "bin").mkdir()
    (shared / "bin" / "python").write_bytes(b"\x7fELF")
    shared.chmod(0o1777)
    project = (tmp_path / "project").resolve()
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(shared / "bin" / "python")

    with pytest.raises(InstallRefusedError):
        install_roots(project / ".venv" / "bin" / "python", project)
