"""What neither Landlock nor bind mounts refuse: a file's metadata and an inbound listener.

Each attack runs through the real sandbox on every confining backend this machine has: through
oct_run over stdio where the tool matters, through the runner where the test must act while the
run is alive, and with the server as an unprivileged user where root would hide the behaviour.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import oct_server, only_text
from mcp import Client
from optional import bubblewrap, landlock, missing
from unprivileged import NOBODY, PACKAGES, copied_packages, unprivileged_python

from oct_mcp.backends import Backend, Limits, SandboxRequest
from oct_mcp.backends.confined import start_confined
from oct_mcp.backends.loopback import loopback_support
from oct_mcp.backends.runner import run_prepared
from oct_mcp.backends.seccomp import filter_program, load_filter

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


FIXTURE = Path(__file__).parent.parent / "data" / "projects" / "cli_package"
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_NODUMP_FL = 0x40
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH

# The probe: each attempt prints its name, DONE or BLOCKED and the error's name, one line each.
PROBE_HEAD = """
import ctypes, errno, fcntl, json, os, socket, stat, struct, sys
args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
def attempt(name, action):
    try:
        action()
        print(name, "DONE", flush=True)
    except OSError as exc:
        print(name, "BLOCKED", errno.errorcode.get(exc.errno, str(exc.errno)), flush=True)
def chattr(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0x40086602, struct.pack("l", 0x40))  # FS_IOC_SETFLAGS, no-dump
    finally:
        os.close(fd)
def openat2(path, mode):
    libc = ctypes.CDLL(None, use_errno=True)
    how = struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, mode, 0)
    fd = libc.syscall(ctypes.c_long(437), ctypes.c_long(-100), path.encode(), how, ctypes.c_long(len(how)))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "openat2")
    os.close(fd)
"""
# Every metadata change a run without writes could make to a file it may only read or not see.
READ_ONLY_PROBE = (
    PROBE_HEAD
    + """
for label, path in (("key", args["key"]), ("hook", args["hook"]), ("project", args["project"])):
    attempt(label + "_chmod", lambda: os.chmod(path, 0o755))
    attempt(label + "_utime", lambda: os.utime(path, (0, 0)))
    attempt(label + "_chown", lambda: os.chown(path, os.getuid(), os.getgid()))
    attempt(label + "_setxattr", lambda: os.setxattr(path, "user.oct", b"1"))
    if label != "key":
        attempt(label + "_chattr", lambda: chattr(path))
"""
)
# What a run that may write the project could do to the files it writes, and to one outside.
WRITABLE_PROBE = (
    PROBE_HEAD
    + """
tool = os.path.join(args["folder"], "tool")
open(tool, "w").write("#!/bin/sh\\n")
attempt("chmod_exec", lambda: os.chmod(tool, 0o755))
attempt("touch", lambda: os.utime(tool, None))
attempt("set_times", lambda: os.utime(tool, (0, 0)))
for bits in (0o4755, 0o2755, 0o1755, 0o757):
    attempt("chmod_%o" % bits, lambda: os.chmod(tool, bits))
attempt("outside_chmod_4777", lambda: os.chmod(args["outside"], 0o4777))
attempt("create_setuid", lambda: os.close(os.open(tool + "-suid", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("create_setgid", lambda: os.close(os.open(tool + "-sgid", os.O_CREAT | os.O_WRONLY, 0o2755)))
attempt("openat2_setuid", lambda: openat2(tool + "-how", 0o4755))
attempt("mknod_setuid", lambda: os.mknod(tool + "-node", stat.S_IFREG | 0o4755))
attempt("mkdir_sticky", lambda: os.mkdir(tool + "-dir", 0o1777))
attempt("chown", lambda: os.chown(tool, os.getuid(), os.getgid()))
attempt("setxattr", lambda: os.setxattr(tool, "user.oct", b"1"))
attempt("chattr", lambda: chattr(tool))
# What Landlock's own rights already refuse (REFER, MAKE_REG, TRUNCATE), kept with the rest.
attempt("link_outside", lambda: os.link(args["outside"], tool + "-outside"))
attempt("link_hook", lambda: os.link(args["hook"], tool + "-hook"))
attempt("rename_over_hook", lambda: os.rename(tool, args["hook"]))
attempt("truncate_hook", lambda: os.truncate(args["hook"], 0))
"""
)
WRITABLE_DONE = ("chmod_exec", "touch", "set_times")
WRITABLE_BLOCKED = (
    "chmod_4755",
    "chmod_2755",
    "chmod_1755",
    "chmod_757",
    "outside_chmod_4777",
    "create_setuid",
    "create_setgid",
    "openat2_setuid",
    "mknod_setuid",
    "mkdir_sticky",
    "chown",
    "setxattr",
    "chattr",
    "link_outside",
    "link_hook",
    "rename_over_hook",
    "truncate_hook",
)


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """oct_mcp and its dependencies, copied where nobody can read them."""
    with copied_packages(PACKAGES) as base:
        yield base


def _backend(name: str) -> Backend:
    return bubblewrap() if name == "bubblewrap" else landlock()


def _metadata(path: Path) -> tuple[object, ...]:
    """What a metadata attack changes: mode, owner, times, extended attributes, inode flags."""
    info = path.lstat()
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0)))[0]
    finally:
        os.close(fd)
    return (info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, tuple(os.listxattr(path)), flags)


def _verdicts(stdout: str) -> dict[str, str]:
    return {line.split()[0]: " ".join(line.split()[1:]) for line in stdout.splitlines() if line.strip()}


def _package(where: Path) -> Path:
    """The fixture package with a venv of its own and a git folder with a hook, as a developer has it."""
    root = where / "cli_package"
    shutil.copytree(FIXTURE, root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    (root / ".git" / "hooks").mkdir(parents=True)
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o644)
    return root


async def _oct_run(project: Path, config_file: Path, backend: str, arguments: dict[str, Any]) -> Any:
    config_file.write_text(json.dumps({"sandbox_backend": backend}))
    with anyio.fail_after(120):
        async with Client(oct_server(project, config_file)) as client:
            return await client.call_tool("oct_run", arguments)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_read_only_oct_run_changes_no_files_mode_owner_times_attributes_or_flags(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _backend(backend)
    package = _package(tmp_path.resolve())
    key = tmp_path.resolve() / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("PRIVATE KEY")
    key.chmod(0o600)
    targets = {
        "key": key,
        "hook": package / ".git" / "hooks" / "pre-commit",
        "project": package / "pyproject.toml",
    }
    before = {name: _metadata(path) for name, path in targets.items()}
    (package / "evil.py").write_text(READ_ONLY_PROBE)
    arguments = json.dumps({name: str(path) for name, path in targets.items()})

    result = await _oct_run(package, config_file, backend, {"argv": ["python", "evil.py", arguments]})

    assert result.structured_content is not None, only_text(result)
    verdicts = _verdicts(result.structured_content["stdout"])
    assert len(verdicts) == 14, result.structured_content
    assert {name: verdict.split()[0] for name, verdict in verdicts.items()} == dict.fromkeys(
        verdicts, "BLOCKED"
    )
    assert {name: _metadata(path) for name, path in targets.items()} == before


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_writing_oct_run_makes_nothing_setuid_setgid_sticky_or_world_writable(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _backend(backend)
    package = _package(tmp_path.resolve())
    # Owned by the server's user (root: a file like /usr/bin/passwd), outside the project.
    outside = tmp_path.resolve() / "outside-tool"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o755)
    before = _metadata(outside)
    (package / "evil.py").write_text(WRITABLE_PROBE)
    hook = package / ".git" / "hooks" / "pre-commit"
    arguments = json.dumps({"folder": str(package / "pkg"), "outside": str(outside), "hook": str(hook)})

    result = await _oct_run(
        package,
        config_file,
        backend,
        {"argv": ["python", "evil.py", arguments], "writes": True, "confirm": True},
    )

    assert result.structured_content is not None, only_text(result)
    verdicts = _verdicts(result.structured_content["stdout"])
    assert {name: verdicts.get(name) for name in WRITABLE_DONE} == dict.fromkeys(WRITABLE_DONE, "DONE")
    assert {name: (verdicts.get(name) or "MISSING").split()[0] for name in WRITABLE_BLOCKED} == (
        dict.fromkeys(WRITABLE_BLOCKED, "BLOCKED")
    )
    assert _metadata(outside) == before
    assert hook.read_text() == "#!/bin/sh\n"
    tool = package / "pkg" / "tool"
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
    made = [path for path in (package / "pkg").rglob("*") if not path.is_symlink()]
    assert [path for path in made if path.lstat().st_mode & SPECIAL_BITS] == []


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_read_only_run_sets_modes_and_times_on_its_own_temporary_files_only(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _backend(backend)
    package = _package(tmp_path.resolve())
    outside = tmp_path.resolve() / "outside-tool"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o755)
    before = _metadata(outside)
    project_before = _metadata(package / "pkg" / "cli.py")
    (package / "scratch.py").write_text(
        PROBE_HEAD
        + textwrap.dedent(f"""
            import shutil, tempfile
            script = os.path.join(tempfile.gettempdir(), "script.sh")
            open(script, "w").write("#!/bin/sh\\n")
            attempt("chmod_exec", lambda: os.chmod(script, 0o755))
            attempt("touch", lambda: os.utime(script, None))
            attempt("set_times", lambda: os.utime(script, ns=(1_000_000_007, 2_000_000_009)))
            print("times", os.stat(script).st_atime_ns, os.stat(script).st_mtime_ns)
            attempt("copy2", lambda: shutil.copy2(script, script + ".copy"))
            print("copied", os.stat(script + ".copy").st_mtime_ns if os.path.exists(script + ".copy") else -1)
            attempt("chmod_setuid", lambda: os.chmod(script, 0o4755))
            attempt("chmod_world_write", lambda: os.chmod(script, 0o757))
            attempt("chmod_project", lambda: os.chmod("scratch.py", 0o600))
            attempt("chmod_outside", lambda: os.chmod({str(outside)!r}, 0o700))
            attempt("times_project", lambda: os.utime("pkg/cli.py", ns=(5, 5)))
            attempt("times_outside", lambda: os.utime({str(outside)!r}, ns=(5, 5)))
            os.symlink("{package / "scratch.py"}", script + ".link")
            attempt("chmod_through_link", lambda: os.chmod(script + ".link", 0o600))
            attempt("times_through_link", lambda: os.utime(script + ".link", ns=(5, 5)))
            attempt("chmod_scratch_itself", lambda: os.chmod(os.path.dirname(tempfile.gettempdir()), 0o755))
            attempt("times_scratch_itself", lambda: os.utime(os.path.dirname(tempfile.gettempdir()), None))
        """)
    )

    result = await _oct_run(package, config_file, backend, {"argv": ["python", "scratch.py"]})

    assert result.structured_content is not None, only_text(result)
    stdout = result.structured_content["stdout"]
    verdicts = _verdicts(stdout)
    # bubblewrap's mounts hold a read-only run to its private /tmp, where modes and times are its
    # own; landlock's supervisor makes a mode or a time in the run's scratch folder only.
    bubblewrap = backend == "bubblewrap"
    for done in ("chmod_exec", "touch", "set_times", "copy2"):
        assert verdicts[done] == "DONE", stdout
    assert "times 1000000007 2000000009" in stdout
    assert "copied 2000000009" in stdout
    assert verdicts["chmod_setuid"] == "BLOCKED EPERM"
    assert verdicts["chmod_world_write"] == "BLOCKED EPERM"
    for refused in ("chmod_project", "chmod_outside", "times_project", "times_outside"):
        assert verdicts[refused].startswith("BLOCKED"), refused
    if not bubblewrap:
        for refused in (
            "chmod_through_link",
            "times_through_link",
            "chmod_scratch_itself",
            "times_scratch_itself",
        ):
            assert verdicts[refused] == "BLOCKED EPERM", refused
    assert _metadata(outside) == before
    assert _metadata(package / "pkg" / "cli.py") == project_before
    assert stat.S_IMODE((package / "scratch.py").stat().st_mode) != 0o600


async def test_a_run_without_network_listens_on_a_socket_it_never_bound_on_loopback_only(
    tmp_path: Path, config_file: Path
) -> None:
    landlock()
    package = _package(tmp_path.resolve())
    (package / "serve.py").write_text(
        textwrap.dedent("""
            import socket
            server = socket.socket()
            server.listen()
            print("listening on", server.getsockname()[0])
        """)
    )

    result = await _oct_run(package, config_file, "landlock", {"argv": ["python", "serve.py"]})

    assert result.structured_content is not None, only_text(result)
    if loopback_support() is not None:
        # The kernel would bind it to every address, and nothing can bind it elsewhere first.
        assert result.structured_content["exit_code"] == 1
        assert result.structured_content["stderr"].splitlines()[-1] == (
            "PermissionError: [Errno 13] Permission denied"
        )
    else:
        # The supervisor binds it to a free loopback port before it listens, not to every address.
        assert result.structured_content["exit_code"] == 0, result.structured_content["stderr"]
        assert result.structured_content["stdout"] == "listening on 127.0.0.1\n"


LOOPBACK_ONE_LINER = (
    "import socket; s = socket.create_server(('127.0.0.1', 0)); "
    "c = socket.create_connection(s.getsockname(), timeout=5); c.sendall(b'pong'); "
    "print(s.accept()[0].recv(4).decode())"
)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_oct_run_without_network_serves_and_reaches_its_own_loopback_server(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    _backend(backend)
    if backend == "landlock" and loopback_support() is not None:
        missing("seccomp user notification", f"{loopback_support()}")
    package = _package(tmp_path.resolve())

    result = await _oct_run(package, config_file, backend, {"argv": ["python", "-c", LOOPBACK_ONE_LINER]})

    assert result.structured_content is not None, only_text(result)
    assert (result.structured_content["exit_code"], result.structured_content["stdout"]) == (0, "pong\n")


LISTEN_PROBE = """
import json, os, socket, sys
secret = open(".env").read()
print("NETNS", os.readlink("/proc/self/ns/net"), flush=True)
for family in (socket.AF_INET, socket.AF_INET6):
    try:
        server = socket.socket(family)
        server.listen()
        print("PORT", int(family), server.getsockname()[1], flush=True)
        server.settimeout(2)
        client, _ = server.accept()
        client.sendall(secret.encode())
        client.close()
        print("SERVED", int(family), flush=True)
    except OSError as exc:
        print("BLOCKED", int(family), type(exc).__name__, exc.errno, flush=True)
"""


def _outside_addresses() -> dict[int, str]:
    """An address of this machine per family that is not loopback: where another host would connect."""
    found: dict[int, str] = {}
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            if name == "lo":
                continue
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), 0x8915, request)  # SIOCGIFADDR
            except OSError:
                continue
            found.setdefault(socket.AF_INET, socket.inet_ntoa(answer[20:24]))
    finally:
        probe.close()
    with open("/proc/net/if_inet6") as table:
        for line in table:
            fields = line.split()
            if fields[5] != "lo" and fields[3] == "00":  # scope global
                found.setdefault(socket.AF_INET6, socket.inet_ntop(socket.AF_INET6, bytes.fromhex(fields[0])))
    return found


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
async def test_a_run_without_network_serves_nothing_to_another_address(tmp_path: Path, backend: str) -> None:
    sandbox = _backend(backend)
    addresses = _outside_addresses()
    if socket.AF_INET not in addresses:
        missing("an address that is not loopback", "this machine has no network interface but lo")
    project = tmp_path.resolve() / "project"
    project.mkdir()
    (project / ".env").write_text("API_KEY=sk-live-123")
    (project / "serve.py").write_text(LISTEN_PROBE)
    scratch = tmp_path.resolve() / "scratch"
    scratch.mkdir()
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "serve.py")),
        project=project,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin:/bin"},
        limits=Limits(memory_bytes=512 * 1_048_576, cpu_seconds=30),
        scratch=scratch,
    )
    received: list[bytes] = []

    async def connect_from_outside(line: bytes) -> None:
        words = line.decode().split()
        if words[:1] != ["PORT"] or int(words[1]) not in addresses:
            return
        try:
            with anyio.fail_after(5):
                stream = await anyio.connect_tcp(addresses[int(words[1])], int(words[2]))
                async with stream:
                    received.append(await stream.receive())
        except OSError:
            received.append(b"")  # refused: nothing listens there for the host

    run = await run_prepared(
        sandbox.prepare(request),
        backend=backend,
        time_limit=30,
        max_output=65_536,
        on_stdout_line=connect_from_outside,
    )

    lines = run.stdout.decode().splitlines()
    assert not any(data.startswith(b"API_KEY") for data in received), received
    assert not any(line.startswith("SERVED") for line in lines), lines
    if backend == "landlock" and loopback_support() is not None:
        # No namespace of its own: listen() on a socket never bound (every address) is refused.
        assert lines[1:] == [
            f"BLOCKED {int(socket.AF_INET)} PermissionError {errno.EACCES}",
            f"BLOCKED {int(socket.AF_INET6)} PermissionError {errno.EACCES}",
        ]
    elif backend == "landlock":
        # It listens on a loopback port: the host's other addresses found nothing there, and so
        # nobody came to be served.
        assert [line.split()[0] for line in lines[1:]] == ["PORT", "BLOCKED", "PORT", "BLOCKED"], lines
        assert [line.split()[2] for line in lines[1:] if line.startswith("BLOCKED")] == ["TimeoutError"] * 2
        assert received, lines
        assert all(data == b"" for data in received), received
    else:
        # Its own network namespace: it may listen, on an address no one outside can reach.
        assert lines[0] != f"NETNS {os.readlink('/proc/self/ns/net')}"


async def test_no_unix_socket_hides_behind_high_bits_in_a_run_with_network(tmp_path: Path) -> None:
    sandbox = landlock()
    project = tmp_path.resolve() / "project"
    project.mkdir()
    # socket() reads an int: the kernel drops bits 32-63 that a 64-bit comparison would still see.
    (project / "probe.py").write_text(
        textwrap.dedent("""
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            args = [ctypes.c_long(value) for value in (41, 1 | 1 << 32, 1, 0)]  # socket(AF_UNIX, ...)
            fd = libc.syscall(*args)
            print(fd, ctypes.get_errno() if fd < 0 else 0)
        """)
    )
    scratch = tmp_path.resolve() / "scratch"
    scratch.mkdir()
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py")),
        project=project,
        writable=False,
        network=True,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin:/bin"},
        limits=Limits(memory_bytes=512 * 1_048_576, cpu_seconds=30),
        scratch=scratch,
    )

    run = await run_prepared(sandbox.prepare(request), backend="landlock", time_limit=30, max_output=65_536)

    assert run.stdout.decode().split() == ["-1", str(errno.EPERM)]


class _FilterOnly:
    """The landlock filter of a run without network, alone: what it refuses where Landlock would not."""

    def restrict_current_thread(self) -> None:
        load_filter(filter_program(sockets=True, network=False, writes=False))

    def end_domain(self, leader: int) -> None:
        """Nothing to sweep."""


async def test_the_filter_refuses_a_tcp_fast_open_send_that_connects_without_connect(
    listener: socket.socket, tmp_path: Path
) -> None:
    if sys.platform != "linux":
        missing("Linux", "seccomp is Linux only")
    # Landlock's connect hook sees this on recent kernels; the filter holds where it does not.
    code = (
        "import socket\n"
        "s = socket.socket()\n"
        "try:\n"
        f"    s.sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', {listener.getsockname()[1]}))\n"
        "    print('SENT')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED', exc.errno)\n"
    )
    process = await start_confined(_FilterOnly(), (sys.executable, "-I", "-c", code), {}, tmp_path)
    try:
        with anyio.fail_after(30):
            output = await process.stdout.receive()
            await process.wait()
    finally:
        await process.aclose()

    assert output.decode().split() == ["BLOCKED", str(errno.EPERM)]
    with pytest.raises(TimeoutError):
        listener.accept()


UNPRIVILEGED_HARNESS = """
import fcntl, json, os, struct, sys
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared

def metadata(path):
    info = path.lstat()
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0)))[0]
    finally:
        os.close(fd)
    return [info.st_mode, info.st_mtime_ns, sorted(os.listxattr(path)), flags]

base = Path(sys.argv[1])
results = {}
for backend in (Bubblewrap(), LandlockBackend()):
    if not backend.probe().usable:
        results[backend.name] = None
        continue
    results[backend.name] = {}
    for writable, probe in ((False, "read_only.py"), (True, "writable.py")):
        world = base / backend.name / str(writable)
        project = world / "project"
        (project / ".git" / "hooks").mkdir(parents=True)
        (project / "pkg").mkdir()
        (project / "pyproject.toml").write_text("[project]\\n")
        hook = project / ".git" / "hooks" / "pre-commit"
        hook.write_text("#!/bin/sh\\n")
        hook.chmod(0o644)
        key = world / "id_ed25519"
        key.write_text("PRIVATE KEY")
        key.chmod(0o600)
        outside = world / "outside-tool"
        outside.write_text("#!/bin/sh\\n")
        outside.chmod(0o755)
        (project / "probe.py").write_text((base / probe).read_text())
        scratch = world / "scratch"
        scratch.mkdir()
        targets = {"key": key, "hook": hook, "project": project / "pyproject.toml", "outside": outside}
        before = {name: metadata(path) for name, path in targets.items()}
        arguments = {name: str(path) for name, path in targets.items()} | {"folder": str(project / "pkg")}
        request = SandboxRequest(
            argv=(sys.executable, "-I", str(project / "probe.py"), json.dumps(arguments)),
            project=project, writable=writable, network=False, protected=(project / ".git",),
            read_only_binds=(Path(sys.base_prefix),), env={"PATH": "/usr/bin:/bin"},
            limits=Limits(memory_bytes=512 * 1024 * 1024, cpu_seconds=30),
            scratch=scratch, strict_files=True,
        )
        prepared = backend.prepare(request)
        run = anyio.run(lambda: run_prepared(prepared, backend=backend.name, time_limit=30, max_output=65536))
        results[backend.name][str(writable)] = {
            "verdicts": dict(line.split(" ", 1) for line in run.stdout.decode().splitlines() if " " in line),
            "stderr": run.stderr.decode(errors="replace")[-2000:],
            "unchanged": {name: metadata(path) == before[name] for name, path in targets.items()},
            "special": sorted(
                str(path) for path in project.rglob("*")
                if not path.is_symlink() and path.lstat().st_mode & 0o7002
            ),
        }
print(json.dumps(results))
"""


def test_as_nobody_no_run_changes_metadata_it_may_not_and_none_makes_a_setuid_file(
    shared_tree: Path,
) -> None:
    python = unprivileged_python()
    base = shared_tree / "metadata"
    base.mkdir()
    shutil.chown(base, NOBODY, NOBODY)
    (shared_tree / "metadata_harness.py").write_text(textwrap.dedent(UNPRIVILEGED_HARNESS))
    (base / "read_only.py").write_text(READ_ONLY_PROBE)
    (base / "writable.py").write_text(WRITABLE_PROBE)
    for path in (shared_tree / "metadata_harness.py", base / "read_only.py", base / "writable.py"):
        path.chmod(0o644)
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shared_tree / 'site'}", "HOME=/nonexistent",
        python, "-s", str(shared_tree / "metadata_harness.py"), str(base),
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)

    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    for name in ("bubblewrap", "landlock"):
        if results[name] is None:
            continue
        read_only, writable = results[name]["False"], results[name]["True"]
        assert len(read_only["verdicts"]) == 14, (name, read_only)
        assert {probe: verdict.split()[0] for probe, verdict in read_only["verdicts"].items()} == (
            dict.fromkeys(read_only["verdicts"], "BLOCKED")
        ), (name, read_only)
        assert set(read_only["unchanged"].values()) == {True}, (name, read_only)
        assert {probe: writable["verdicts"].get(probe) for probe in WRITABLE_DONE} == dict.fromkeys(
            WRITABLE_DONE, "DONE"
        ), (name, writable)
        assert {
            probe: (writable["verdicts"].get(probe) or "MISSING").split()[0] for probe in WRITABLE_BLOCKED
        } == (dict.fromkeys(WRITABLE_BLOCKED, "BLOCKED")), (name, writable)
        assert writable["unchanged"]["outside"] is True, (name, writable)
        assert writable["special"] == [], (name, writable)


AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000


def _verdict(program: bytes, nr: int, arch: int = AUDIT_ARCH_X86_64, args: tuple[int, ...] = ()) -> int:
    """What the kernel's seccomp would return for one call: a classic BPF interpreter over seccomp_data."""
    padded = (*args, *(0,) * (6 - len(args)))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *padded)
    code = [struct.unpack_from("<HBBI", program, offset) for offset in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        pc += 1
        if op == 0x20:  # ld [k]
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif op == 0x54:  # and #k
            accumulator &= k
        elif op == 0x05:  # ja
            pc += k
        elif op in (0x15, 0x25, 0x35, 0x45):  # jeq, jgt, jge, jset
            taken = {
                0x15: accumulator == k,
                0x25: accumulator > k,
                0x35: accumulator >= k,
                0x45: bool(accumulator & k),
            }[op]
            pc += jt if taken else jf
        elif op == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"an instruction this interpreter does not know: {op:#x}")


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
@pytest.mark.parametrize("writes", [False, True])
def test_no_rule_is_skipped_through_the_x32_twin_of_a_call_or_a_32_bit_call(writes: bool) -> None:
    from seccompy import syscalls

    if syscalls.arch() != "x86_64":
        pytest.skip("x32 and the 32-bit ABI are x86-64's")
    program = filter_program(sockets=True, network=False, writes=writes)
    chmod, listen, x32 = 90, 50, 0x40000000

    assert _verdict(program, chmod, args=(0, 0o4755)) == SECCOMP_RET_ERRNO | errno.EPERM
    assert _verdict(program, listen) == SECCOMP_RET_ERRNO | errno.EPERM
    # The same calls by their x32 numbers, and one no list of x32 numbers would name.
    for number in (chmod, listen, 514, 0):  # 514: x32's ioctl; 0: read
        assert _verdict(program, x32 | number, args=(0, 0o4755)) == SECCOMP_RET_ERRNO | errno.ENOSYS
    # int 0x80 from a 64-bit command: the i386 table, where 15 is chmod. The process dies.
    assert _verdict(program, 15, arch=AUDIT_ARCH_I386, args=(0, 0o4755)) == SECCOMP_RET_KILL_PROCESS
    assert _verdict(program, 0) == SECCOMP_RET_ALLOW


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
def test_a_mode_or_a_request_cannot_hide_behind_high_bits() -> None:
    from seccompy import syscalls

    if syscalls.arch() != "x86_64":
        pytest.skip("the numbers below are x86-64's")
    program = filter_program(sockets=True, network=False, writes=True)
    chmod, ioctl, high = 90, 16, 0xFFFF_FFFF_0000_0000

    # The kernel reads a mode_t and an unsigned int: bits 32-63 must change nothing.
    assert _verdict(program, chmod, args=(0, high | 0o4755)) == SECCOMP_RET_ERRNO | errno.EPERM
    assert _verdict(program, chmod, args=(0, high | 0o755)) == SECCOMP_RET_ALLOW
    assert _verdict(program, ioctl, args=(3, high | FS_IOC_SETFLAGS)) == SECCOMP_RET_ERRNO | errno.EPERM
    assert _verdict(program, ioctl, args=(3, FS_IOC_GETFLAGS)) == SECCOMP_RET_ALLOW


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
def test_the_supervised_filter_hands_over_tcp_udp_and_unix_and_refuses_every_other_socket() -> None:
    from seccompy import syscall_nr, syscalls

    if syscalls.arch() != "x86_64":
        pytest.skip("the numbers below are x86-64's")
    program = filter_program(sockets=True, network=False, writes=False, supervised=True)
    notify, refused = 0x7FC00000, SECCOMP_RET_ERRNO | errno.EPERM
    nr = {name: syscall_nr(name) for name in ("socket", "sendto", "sendmsg", "sendmmsg", "accept4", "bind")}
    inet, inet6, unix, stream, dgram, raw, nonblock = 2, 10, 1, 1, 2, 3, 0o4000

    for family in (inet, inet6):
        assert _verdict(program, nr["socket"], args=(family, stream | nonblock, 0)) == notify
        assert _verdict(program, nr["socket"], args=(family, dgram, 17)) == notify
        assert _verdict(program, nr["socket"], args=(family, dgram, 1)) == refused  # a ping socket
        assert _verdict(program, nr["socket"], args=(family, raw, 0)) == refused
        assert _verdict(program, nr["socket"], args=(family, stream, 17)) == refused
        # High bits in the family hide nothing: no rule matches, and the call is refused.
        assert _verdict(program, nr["socket"], args=(family | 1 << 32, stream, 0)) == refused
    assert _verdict(program, nr["socket"], args=(unix, stream, 0)) == notify
    assert _verdict(program, nr["socket"], args=(unix, raw, 0)) == refused
    assert _verdict(program, nr["bind"], args=(3, 0, 16)) == notify
    # A send on a connected socket stays a plain call; one with an address goes to the supervisor.
    assert _verdict(program, nr["sendto"], args=(3, 0, 1, 0, 0, 0)) == SECCOMP_RET_ALLOW
    assert _verdict(program, nr["sendto"], args=(3, 0, 1, 0, 0x1000, 16)) == notify
    assert _verdict(program, nr["sendto"], args=(3, 0, 1, 0x20000000, 0x1000, 16)) == refused  # fast open
    assert _verdict(program, nr["sendmsg"], args=(3, 0x1000, 0)) == notify
    assert _verdict(program, nr["sendmmsg"], args=(3, 0x1000, 1, 0)) == SECCOMP_RET_ERRNO | errno.ENOSYS
    assert _verdict(program, nr["accept4"], args=(3, 0, 0, 0)) == SECCOMP_RET_ALLOW


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
def test_the_supervised_filter_hands_over_pty_peers_dev_shm_names_and_scratch_metadata_only() -> None:
    from seccompy import syscall_nr, syscalls

    if syscalls.arch() != "x86_64":
        pytest.skip("the numbers below are x86-64's")
    program = filter_program(sockets=True, network=False, writes=False, supervised=True)
    plain = filter_program(sockets=True, network=False, writes=False)
    notify, refused = 0x7FC00000, SECCOMP_RET_ERRNO | errno.EPERM
    names = ("openat", "unlink", "unlinkat", "linkat", "ioctl", "chmod", "fchmod", "utimensat", "utimes")
    nr = {name: syscall_nr(name) for name in names}
    tiocgptpeer, at_fdcwd, o_creat, o_excl, o_nofollow = 0x5441, 0xFFFFFF9C, 0o100, 0o200, 0o400000

    assert _verdict(program, nr["ioctl"], args=(3, tiocgptpeer, 2)) == notify
    assert _verdict(program, nr["ioctl"], args=(3, 0x5401, 0)) == SECCOMP_RET_ALLOW  # TCGETS
    # shm_open's and mkstemp's opens, and sem_open's temporary file; an ordinary open stays plain.
    assert _verdict(program, nr["openat"], args=(at_fdcwd, 0, 2 | o_nofollow, 0)) == notify
    assert _verdict(program, nr["openat"], args=(at_fdcwd, 0, 2 | o_creat | o_excl, 0o600)) == notify
    assert _verdict(program, nr["openat"], args=(at_fdcwd, 0, 0, 0)) == SECCOMP_RET_ALLOW
    assert _verdict(program, nr["openat"], args=(at_fdcwd, 0, 1 | o_creat, 0o644)) == SECCOMP_RET_ALLOW
    # A setuid file is refused before the supervisor is asked.
    assert _verdict(program, nr["openat"], args=(at_fdcwd, 0, o_creat | o_excl, 0o4755)) == refused
    assert _verdict(program, nr["unlink"], args=(0,)) == notify
    assert _verdict(program, nr["unlinkat"], args=(at_fdcwd, 0, 0)) == notify
    assert _verdict(program, nr["unlinkat"], args=(3, 0, 0)) == SECCOMP_RET_ALLOW  # left to Landlock
    assert _verdict(program, nr["linkat"], args=(at_fdcwd, 0, at_fdcwd, 0, 0)) == notify
    # chmod by path goes to the supervisor (made in the scratch folder only), never a refused bit.
    assert _verdict(program, nr["chmod"], args=(0, 0o600)) == notify
    for bit in (0o4000, 0o2000, 0o1000, 0o0002):
        assert _verdict(program, nr["chmod"], args=(0, 0o600 | bit)) == refused
    assert _verdict(program, nr["fchmod"], args=(3, 0o600)) == refused
    # utimensat goes to the supervisor too (times set in the scratch folder only); utimes, which
    # glibc no longer calls, stays refused.
    assert _verdict(program, nr["utimensat"], args=(at_fdcwd, 0, 0, 0)) == notify
    assert _verdict(program, nr["utimes"], args=(0, 0)) == refused
    # Without a supervisor none of it is handed over: the kernel would answer ENOSYS.
    assert _verdict(plain, nr["ioctl"], args=(3, tiocgptpeer, 2)) == SECCOMP_RET_ALLOW
    assert _verdict(plain, nr["unlink"], args=(0,)) == SECCOMP_RET_ALLOW
    assert _verdict(plain, nr["chmod"], args=(0, 0o600)) == refused
    assert _verdict(plain, nr["utimensat"], args=(at_fdcwd, 0, 0, 0)) == refused
