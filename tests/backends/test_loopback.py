"""A run without network on loopback: its own TCP and UDP servers work, nothing else is reached."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from optional import bubblewrap, landlock, missing

from oct_mcp.backends import Backend, Limits, SandboxRequest
from oct_mcp.backends.loopback import loopback_support
from oct_mcp.backends.runner import run_prepared

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LIMITS = Limits(memory_bytes=512 * 1_048_576, cpu_seconds=60)
ROOT = Path(__file__).resolve().parents[2]


def _backend(name: str) -> Backend:
    backend: Backend = bubblewrap() if name == "bubblewrap" else landlock()
    if name == "landlock" and loopback_support() is not None:
        missing("seccomp user notification", f"{loopback_support()} (Linux 5.19+)")
    return backend


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


async def _run(backend: Backend, tmp_path: Path, code: str, *args: str) -> tuple[int | None, list[str], str]:
    project = tmp_path.resolve() / "project"
    project.mkdir(exist_ok=True)
    scratch = tmp_path.resolve() / "scratch"
    scratch.mkdir(exist_ok=True)
    (project / "probe.py").write_text(textwrap.dedent(code))
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py"), *args),
        project=project,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin:/bin"},
        limits=LIMITS,
        scratch=scratch,
    )
    with anyio.fail_after(90):
        run = await run_prepared(
            backend.prepare(request), backend=backend.name, time_limit=60, max_output=1 << 20
        )
    return run.exit_code, run.stdout.decode().splitlines(), run.stderr.decode()


TCP_PROBE = """
import asyncio, socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
client = socket.create_connection(server.getsockname(), timeout=10)
accepted, _ = server.accept()
client.sendall(b"ping")
print("socket", accepted.recv(4).decode())

async def main():
    async def echo(reader, writer):
        writer.write(await reader.readexactly(5))
        await writer.drain()
        writer.close()
    served = await asyncio.start_server(echo, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*served.sockets[0].getsockname()[:2])
    writer.write(b"hello")
    await writer.drain()
    print("asyncio", (await reader.readexactly(5)).decode())
    writer.close()
    served.close()
asyncio.run(main())
"""


@pytest.mark.parametrize("name", ["bubblewrap", "landlock"])
async def test_a_run_without_network_serves_itself_over_loopback_tcp(tmp_path: Path, name: str) -> None:
    code, lines, stderr = await _run(_backend(name), tmp_path, TCP_PROBE)

    assert (code, lines) == (0, ["socket ping", "asyncio hello"]), stderr


UDP_PROBE = """
import socket, sys
family = {"4": socket.AF_INET, "6": socket.AF_INET6}[sys.argv[1]]
host = "127.0.0.1" if sys.argv[1] == "4" else "::1"
server = socket.socket(family, socket.SOCK_DGRAM)
server.bind((host, 0))
client = socket.socket(family, socket.SOCK_DGRAM)
client.settimeout(10)
server.settimeout(10)
client.sendto(b"to", server.getsockname())
data, sender = server.recvfrom(16)
server.sendmsg([b"fro"], [], 0, sender)
connected = socket.socket(family, socket.SOCK_DGRAM)
connected.connect(server.getsockname())
connected.send(b"again")
print(data.decode(), client.recv(16).decode(), server.recv(16).decode())
"""


@pytest.mark.parametrize("name", ["bubblewrap", "landlock"])
@pytest.mark.parametrize("version", ["4", "6"])
async def test_a_run_without_network_sends_udp_to_itself_on_loopback(
    tmp_path: Path, name: str, version: str
) -> None:
    if version == "6" and not _ipv6_loopback():
        missing("IPv6 loopback", "this machine cannot bind ::1")
    code, lines, stderr = await _run(_backend(name), tmp_path, UDP_PROBE, version)

    assert (code, lines) == (0, ["to fro again"]), stderr


REFUSALS_PROBE = """
import errno, socket, sys
host_tcp, host_udp = int(sys.argv[1]), int(sys.argv[2])
def attempt(name, action):
    try:
        action()
        print(name, "DONE")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
def bound(name, family, kind, host):
    made = socket.socket(family, kind)
    if host is None:
        made.listen()
    else:
        made.bind((host, 0))
    print(name, made.getsockname()[0])
bound("bind_any4", socket.AF_INET, socket.SOCK_STREAM, "0.0.0.0")
bound("bind_any6", socket.AF_INET6, socket.SOCK_STREAM, "::")
bound("bind_any_mapped", socket.AF_INET6, socket.SOCK_STREAM, "::ffff:0.0.0.0")
bound("listen_unbound", socket.AF_INET, socket.SOCK_STREAM, None)
bound("udp_bind_empty", socket.AF_INET, socket.SOCK_DGRAM, "")
attempt("bind_privileged", lambda: socket.socket().bind(("127.0.0.1", 80)))
attempt("host_tcp", lambda: socket.create_connection(("127.0.0.1", host_tcp), timeout=5))
def steal(kind):
    thief = socket.socket(socket.AF_INET, kind)
    thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    thief.bind(("127.0.0.1", host_tcp if kind == socket.SOCK_STREAM else host_udp))
attempt("share_host_tcp_port", lambda: steal(socket.SOCK_STREAM))
attempt("share_host_udp_port", lambda: steal(socket.SOCK_DGRAM))
udp = lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("host_udp", lambda: udp().sendto(b"x", ("127.0.0.1", host_udp)))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("ping", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
"""


async def test_a_landlock_run_binds_the_wildcard_on_loopback_and_reaches_no_socket_of_the_host_there(
    tmp_path: Path,
) -> None:
    # The host's own loopback services (a resolver, a proxy, a database) would carry data elsewhere,
    # and one that shares its port (SO_REUSEPORT) would share its clients with a run of its user.
    host_tcp = socket.create_server(("127.0.0.1", 0), reuse_port=True)
    host_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host_udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    host_udp.bind(("127.0.0.1", 0))
    try:
        code, lines, stderr = await _run(
            _backend("landlock"), tmp_path, REFUSALS_PROBE,
            str(host_tcp.getsockname()[1]), str(host_udp.getsockname()[1]),
        )  # fmt: skip
        host_tcp.setblocking(False)
        host_udp.setblocking(False)
        with pytest.raises(BlockingIOError):
            host_tcp.accept()
        with pytest.raises(BlockingIOError):
            host_udp.recv(16)
    finally:
        host_tcp.close()
        host_udp.close()

    assert code == 0, stderr
    assert dict(line.split() for line in lines) == {
        # The wildcard, given or left to the kernel by a listen(), is bound on loopback.
        "bind_any4": "127.0.0.1",
        "bind_any6": "::1",
        "bind_any_mapped": "::ffff:127.0.0.1",
        "listen_unbound": "127.0.0.1",
        "udp_bind_empty": "127.0.0.1",
        "bind_privileged": "EACCES",
        "host_tcp": "ECONNREFUSED",
        "share_host_tcp_port": "EADDRINUSE",
        "share_host_udp_port": "EADDRINUSE",
        "host_udp": "ECONNREFUSED",
        "raw": "EPERM",
        "ping": "EPERM",
    }


# Run as root inside a network namespace of the test's own: a veth pair gives this "machine" another
# address, with a TCP listener and a UDP receiver on it that the run must never reach.
NETNS_HARNESS = """
import errno, json, socket, subprocess, sys, threading
from dataclasses import replace
from pathlib import Path
import anyio
from oct_mcp.backends import Limits, SandboxRequest
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.runner import run_prepared

for command in (
    "ip link set lo up", "ip link add oct0 type veth peer name oct1", "ip addr add 10.77.0.1/24 dev oct0",
    "ip -6 addr add fd77::1/64 dev oct0 nodad", "ip link set oct0 up", "ip link set oct1 up",
):
    subprocess.run(command.split(), check=True)
outside_tcp = socket.create_server(("10.77.0.1", 0))
outside_tcp6 = socket.create_server(("fd77::1", 0), family=socket.AF_INET6)
outside_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
outside_udp.bind(("10.77.0.1", 0))
for listening in (outside_tcp, outside_tcp6, outside_udp):
    listening.setblocking(False)
base = Path(sys.argv[1])
request = SandboxRequest(
    argv=(sys.executable, "-I", str(base / "probe.py"), str(outside_tcp.getsockname()[1]),
          str(outside_tcp6.getsockname()[1]), str(outside_udp.getsockname()[1])),
    project=base, writable=False, network=False, protected=(),
    read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)), env={"PATH": "/usr/bin:/bin"},
    limits=Limits(memory_bytes=512 * 1024 * 1024, cpu_seconds=120), scratch=base / "scratch",
)
request.scratch.mkdir()
def knock():
    # While the run serves on the wildcard, knock on its port from the machine's other addresses.
    ports, answer = base / "scratch" / "wildcard", base / "scratch" / "knocked"
    while not ports.exists() and not finished.is_set():
        finished.wait(0.05)
    if finished.is_set():
        return
    port4, port6 = (int(value) for value in ports.read_text().split())
    outcomes = []
    for family, host, port in ((socket.AF_INET, "10.77.0.1", port4), (socket.AF_INET6, "fd77::1", port6)):
        try:
            socket.create_connection((host, port), timeout=3).close()
            outcomes.append("reached")
        except OSError as exc:
            outcomes.append(errno.errorcode.get(exc.errno or 0, "timeout"))
    answer.write_text(" ".join(outcomes))
finished = threading.Event()
knocker = threading.Thread(target=knock)
knocker.start()
prepared = LandlockBackend().prepare(request)
run = anyio.run(lambda: run_prepared(prepared, backend="landlock", time_limit=120, max_output=1 << 20))
finished.set()
knocker.join()
reached = 0
for listening in (outside_tcp, outside_tcp6):
    while True:
        try:
            listening.accept()[0].close()
            reached += 1
        except BlockingIOError:
            break
while True:
    try:
        outside_udp.recv(64)
        reached += 1
    except BlockingIOError:
        break
report = {"exit": run.exit_code, "stdout": run.stdout.decode(), "stderr": run.stderr.decode()[-3000:]}
print(json.dumps({**report, "reached": reached}))
"""

NETNS_PROBE = """
import ctypes, errno, socket, struct, sys, threading
tcp_port, tcp6_port, udp_port = (int(value) for value in sys.argv[1:4])
def attempt(name, action):
    try:
        action()
        print(name, "DONE", flush=True)
    except OSError as exc:
        print(name, errno.errorcode[exc.errno], flush=True)
attempt("tcp", lambda: socket.create_connection(("10.77.0.1", tcp_port), timeout=3))
attempt("tcp6", lambda: socket.create_connection(("fd77::1", tcp6_port), timeout=3))
attempt("tcp_mapped", lambda: socket.socket(socket.AF_INET6).connect(("::ffff:10.77.0.1", tcp_port)))
udp = lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("udp_sendto", lambda: udp().sendto(b"x", ("10.77.0.1", udp_port)))
attempt("udp_sendmsg", lambda: udp().sendmsg([b"x"], [], 0, ("10.77.0.1", udp_port)))
attempt("udp_connect", lambda: udp().connect(("10.77.0.1", udp_port)))
attempt("bind_other", lambda: socket.socket().bind(("10.77.0.1", 0)))
import os, time
wild4 = socket.create_server(("0.0.0.0", 0))
wild6 = socket.create_server(("::", 0), family=socket.AF_INET6)
scratch = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scratch")
with open(os.path.join(scratch, "wildcard.part"), "w") as ports:
    ports.write(f"{wild4.getsockname()[1]} {wild6.getsockname()[1]}")
os.rename(os.path.join(scratch, "wildcard.part"), os.path.join(scratch, "wildcard"))
for _ in range(200):
    if os.path.exists(os.path.join(scratch, "knocked")):
        break
    time.sleep(0.05)
with open(os.path.join(scratch, "knocked")) as knocked:
    print("knocked", knocked.read().replace(" ", "/"), flush=True)

# The race: one thread flips the address in memory between the run's own listener and the
# outside one while the other connects and sends through it, again and again.
libc = ctypes.CDLL(None, use_errno=True)
own = socket.create_server(("127.0.0.1", 0), backlog=4096)
own_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
own_udp.bind(("127.0.0.1", own.getsockname()[1]))
def sockaddr(host, port):
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)
inside_tcp, outside_tcp = sockaddr("127.0.0.1", own.getsockname()[1]), sockaddr("10.77.0.1", tcp_port)
inside_udp, outside_udp = sockaddr("127.0.0.1", own.getsockname()[1]), sockaddr("10.77.0.1", udp_port)
address = ctypes.create_string_buffer(16)
stop = threading.Event()
choices = [inside_tcp, outside_tcp]
def flip():
    turn = 0
    while not stop.is_set():
        ctypes.memmove(address, choices[turn & 1], 16)
        turn += 1
def drain():
    own.settimeout(0.5)
    while not stop.is_set():
        try:
            own.accept()[0].close()
        except OSError:
            pass
threads = [threading.Thread(target=flip), threading.Thread(target=drain)]
for thread in threads:
    thread.start()
outcomes = {}
for _ in range(600):
    attempt_socket = socket.socket()
    result = libc.connect(attempt_socket.fileno(), address, 16)
    key = "ok" if result == 0 else errno.errorcode[ctypes.get_errno()]
    outcomes[key] = outcomes.get(key, 0) + 1
    attempt_socket.close()
choices[:] = [inside_udp, outside_udp]
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(600):
    result = libc.sendto(sender.fileno(), b"x", 1, 0, address, 16)
    key = "udp_ok" if result == 1 else "udp_" + errno.errorcode[ctypes.get_errno()]
    outcomes[key] = outcomes.get(key, 0) + 1
stop.set()
for thread in threads:
    thread.join()
print("race", " ".join(f"{key}={value}" for key, value in sorted(outcomes.items())), flush=True)
"""


def test_a_landlock_run_reaches_no_other_address_of_the_machine_even_racing_its_own_memory(
    tmp_path: Path,
) -> None:
    _backend("landlock")
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        missing("a network namespace of the test's own", "needs root, unshare and ip (iproute2)")
    base = tmp_path.resolve()
    (base / "probe.py").write_text(textwrap.dedent(NETNS_PROBE))
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(ROOT)}
    command = ["unshare", "-n", sys.executable, "-c", textwrap.dedent(NETNS_HARNESS), str(base)]

    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["exit"] == 0, result["stderr"]
    lines = result["stdout"].splitlines()
    verdicts = dict(line.split(" ", 1) for line in lines)
    race = dict(item.split("=") for item in verdicts.pop("race").split())
    assert verdicts == {
        "tcp": "ENETUNREACH",
        "tcp6": "ENETUNREACH",
        "tcp_mapped": "ENETUNREACH",
        "udp_sendto": "ENETUNREACH",
        "udp_sendmsg": "ENETUNREACH",
        "udp_connect": "ENETUNREACH",
        "bind_other": "EACCES",
        # A server on the wildcard is on loopback: the machine's other addresses do not reach it.
        "knocked": "ECONNREFUSED/ECONNREFUSED",
    }
    # Both addresses were seen (the race ran), and only the run's own listener was reached.
    assert {key for key, count in race.items() if int(count) > 0} == set(race), race
    assert set(race) == {"ok", "ENETUNREACH", "udp_ok", "udp_ENETUNREACH"}, race
    assert result["reached"] == 0


LO_PROBE = """
import fcntl, socket, struct
flags = fcntl.ioctl(socket.socket(), 0x8913, struct.pack("16sH", b"lo", 0))  # SIOCGIFFLAGS
print(sorted(name for _, name in socket.if_nameindex()), struct.unpack_from("H", flags, 16)[0] & 1)
"""


async def test_bubblewraps_own_network_namespace_has_only_lo_and_it_is_up(tmp_path: Path) -> None:
    code, lines, stderr = await _run(_backend("bubblewrap"), tmp_path, LO_PROBE)

    assert (code, lines) == (0, ["['lo'] 1"]), stderr


RESOLVE_PROBE = """
import socket
flags = socket.AI_PASSIVE | socket.AI_ADDRCONFIG
found = socket.getaddrinfo("localhost", 0, socket.AF_INET, socket.SOCK_STREAM, 0, flags)
print("localhost", sorted({entry[4][0] for entry in found}))
server = socket.create_server(found[0][4])
print("listens", server.getsockname()[0])
with socket.create_connection(("localhost", server.getsockname()[1]), timeout=5):
    print("reached localhost")
try:
    socket.create_connection(("192.0.2.1", 80), timeout=3)
    print("reached the world")
except OSError as exc:
    print("world", exc.errno == 101)
"""


async def test_in_bubblewraps_own_network_localhost_resolves_as_anyio_asks_and_nothing_else_is_there(
    tmp_path: Path,
) -> None:
    # glibc's AI_ADDRCONFIG counts IPv4 only where an address other than 127.0.0.1 exists: the run's
    # namespace has 127.0.0.2 on `lo` for that, still loopback, still the only device.
    code, lines, stderr = await _run(_backend("bubblewrap"), tmp_path, RESOLVE_PROBE)

    assert (code, lines) == (
        0,
        [
            "localhost ['127.0.0.1']",
            "listens 127.0.0.1",
            "reached localhost",
            "world True",
        ],
    ), stderr


STUCK_PROBE = """
import socket
a, b = socket.socketpair()
print("sending", flush=True)
a.sendmsg([bytes(64 << 20)])  # b never reads: the supervisor's send waits, and the run with it
"""


async def test_a_landlock_run_killed_while_the_supervisor_sends_for_it_ends_and_hangs_nothing(
    tmp_path: Path,
) -> None:
    backend = _backend("landlock")
    project = tmp_path.resolve()
    (project / "probe.py").write_text(textwrap.dedent(STUCK_PROBE))
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py")),
        project=project,
        writable=False,
        network=False,
        protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)),
        env={"PATH": "/usr/bin:/bin"},
        limits=LIMITS,
        scratch=project,
    )

    with anyio.fail_after(60):
        run = await run_prepared(
            backend.prepare(request), backend="landlock", time_limit=2, max_output=65_536, grace=0.5
        )
        second = await run_prepared(
            backend.prepare(replace(request, argv=(sys.executable, "-I", "-c", "print('next')"))),
            backend="landlock", time_limit=30, max_output=65_536,
        )  # fmt: skip

    assert (run.timed_out, run.stdout) == (True, b"sending\n")
    assert (second.exit_code, second.stdout) == (0, b"next\n")


UNIX_PROBE = """
import os, socket, sys, threading
scratch, outside = sys.argv[1], sys.argv[2]
def attempt(name, action):
    try:
        action()
        print(name, "DONE", flush=True)
    except OSError as exc:
        print(name, type(exc).__name__, flush=True)
path = os.path.join(scratch, "server.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
client = socket.socket(socket.AF_UNIX)
client.connect(path)
client.sendall(b"unix")
print("stream", server.accept()[0].recv(4).decode(), server.getsockname() == path, flush=True)
datagrams = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
datagrams.bind(os.path.join(scratch, "datagrams.sock"))
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"dgram", os.path.join(scratch, "datagrams.sock"))
print("dgram", datagrams.recv(5).decode(), flush=True)
attempt("connect_outside", lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(outside, "agent.sock")))
attempt("bind_outside", lambda: socket.socket(socket.AF_UNIX).bind(os.path.join(outside, "planted.sock")))
attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0oct-host-" + sys.argv[3]))
attempt("connect_missing", lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(scratch, "none.sock")))
attempt("outside_missing", lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(outside, "none.sock")))

# The race: a thread swaps a folder of the scratch between a real one (holding the run's own
# socket) and a link to the outside folder (holding the host's), while connects and binds go on.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
swapped, link = os.path.join(scratch, "swap"), os.path.join(scratch, "link")
os.mkdir(swapped)
os.symlink(outside, link)
own = socket.socket(socket.AF_UNIX)
own.bind(os.path.join(swapped, "agent.sock"))
own.listen(4096)
stop = threading.Event()
def swap():
    # renameat2(RENAME_EXCHANGE): "swap" is the real folder, then the link, then the folder again.
    while not stop.is_set():
        libc.renameat2(-100, swapped.encode(), -100, link.encode(), 2)
def drain():
    own.settimeout(0.2)
    while not stop.is_set():
        try:
            own.accept()[0].close()
        except OSError:
            pass
threads = [threading.Thread(target=swap), threading.Thread(target=drain)]
for thread in threads:
    thread.start()
outcomes = {}
for turn in range(200):
    attempt_socket = socket.socket(socket.AF_UNIX)
    try:
        attempt_socket.connect(os.path.join(swapped, "agent.sock"))
        key = "connected"
    except OSError as exc:
        key = type(exc).__name__
    outcomes[key] = outcomes.get(key, 0) + 1
    attempt_socket.close()
    try:
        socket.socket(socket.AF_UNIX).bind(os.path.join(swapped, "planted-%d.sock" % turn))
    except OSError:
        pass
stop.set()
for thread in threads:
    thread.join()
print("race", " ".join(f"{key}={value}" for key, value in sorted(outcomes.items())), flush=True)
"""


async def test_a_landlock_run_has_unix_sockets_in_its_scratch_folder_and_reaches_none_outside(
    tmp_path: Path,
) -> None:
    backend = _backend("landlock")
    outside = tmp_path.resolve() / "outside"  # as an ssh-agent, Docker or D-Bus socket
    outside.mkdir()
    host = socket.socket(socket.AF_UNIX)
    host.bind(str(outside / "agent.sock"))
    host.listen()
    host.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0oct-host-{os.getpid()}")
    abstract.listen()
    abstract.setblocking(False)
    scratch = str(tmp_path.resolve() / "scratch")
    try:
        code, lines, stderr = await _run(
            backend, tmp_path, UNIX_PROBE, scratch, str(outside), str(os.getpid())
        )
        with pytest.raises(BlockingIOError):
            host.accept()
        with pytest.raises(BlockingIOError):
            abstract.accept()
    finally:
        host.close()
        abstract.close()

    assert code == 0, stderr
    verdicts = dict(line.split(" ", 1) for line in lines)
    race = dict(item.split("=") for item in verdicts.pop("race").split())
    assert verdicts == {
        "stream": "unix True",
        "dgram": "dgram",
        "connect_outside": "PermissionError",
        "bind_outside": "PermissionError",
        "abstract": "PermissionError",
        # In its own folder a name that is not there is missing, as in a terminal; outside it,
        # whether a name is there is not the run's to learn.
        "connect_missing": "FileNotFoundError",
        "outside_missing": "PermissionError",
    }
    # Both folders were met (the race ran), and only the run's own socket was reached.
    assert set(race) == {"connected", "PermissionError"}, race
    assert sorted(path.name for path in outside.iterdir()) == ["agent.sock"]
    # Binds went on through the race, and landed in the scratch folder only.
    planted = [path for path in (tmp_path / "scratch").rglob("planted-*.sock") if path.is_socket()]
    assert planted, "no bind succeeded"


BUBBLEWRAP_UNIX_PROBE = """
import os, socket, tempfile
path = os.path.join(tempfile.mkdtemp(), "server.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
client = socket.socket(socket.AF_UNIX)
client.connect(path)
client.sendall(b"unix")
print(server.accept()[0].recv(4).decode())
"""


async def test_a_bubblewrap_run_has_unix_sockets_in_its_private_tmp(tmp_path: Path) -> None:
    code, lines, stderr = await _run(_backend("bubblewrap"), tmp_path, BUBBLEWRAP_UNIX_PROBE)

    assert (code, lines) == (0, ["unix"]), stderr


FREE_UDP_PROBE = """
import errno, os, socket, sys, time
free, meeting = int(sys.argv[1]), sys.argv[2]
connected = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
connected.connect(("127.0.0.1", free))
print("peer", connected.getpeername()[1] == free)
connected.send(b"dropped")
open(os.path.join(meeting, "connected"), "w").close()
deadline = time.monotonic() + 30
while not os.path.exists(os.path.join(meeting, "tried")) and time.monotonic() < deadline:
    time.sleep(0.05)
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("127.0.0.1", free))
server.settimeout(10)
connected.send(b"taken over")
print("received", server.recv(32).decode())
held = []
for port in range(free + 1, free + 200):
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("127.0.0.1", port))
        held.append(probe)
    except OSError as exc:
        assert exc.errno == errno.ECONNREFUSED, exc
print("held", len(held))
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(("127.0.0.53", 53))
    print("privileged held")
except OSError as exc:
    print("privileged", errno.errorcode[exc.errno])
"""


async def test_a_landlock_run_connects_udp_to_a_free_port_which_no_host_service_can_take_meanwhile(
    tmp_path: Path,
) -> None:
    # A terminal connects a UDP socket to a port nobody holds (anyio's tests read its addresses so);
    # the run may too, but the port is held for it: a host service binding it later would receive
    # the run's datagrams, as sends on a connected socket are not supervised.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as finder:
        finder.bind(("127.0.0.1", 0))
        free = finder.getsockname()[1]
    backend = _backend("landlock")
    project = tmp_path.resolve() / "project"
    project.mkdir()
    scratch = tmp_path.resolve() / "scratch"
    scratch.mkdir()
    (project / "probe.py").write_text(textwrap.dedent(FREE_UDP_PROBE))
    request = SandboxRequest(
        argv=(sys.executable, "-I", str(project / "probe.py"), str(free), str(scratch)),
        project=project, writable=False, network=False, protected=(),
        read_only_binds=(Path(sys.base_prefix), Path(sys.prefix)), env={"PATH": "/usr/bin:/bin"},
        limits=LIMITS, scratch=scratch,
    )  # fmt: skip
    taken_meanwhile: list[str] = []

    async def host_service_tries_the_port() -> None:
        # While the run holds it: the host's bind fails, with or without the wildcard.
        with anyio.fail_after(60):
            while not (scratch / "connected").exists():
                await anyio.sleep(0.05)
        for host in ("127.0.0.1", "0.0.0.0"):  # noqa: S104 - a bind to try, never served
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as host_socket:
                try:
                    host_socket.bind((host, free))
                    taken_meanwhile.append(host)
                except OSError:
                    pass
        (scratch / "tried").touch()

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(host_service_tries_the_port)
            run = await run_prepared(
                backend.prepare(request), backend="landlock", time_limit=60, max_output=1 << 20
            )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as after:
        after.bind(("127.0.0.1", free))  # the run has ended: the port is the machine's again

    lines = run.stdout.decode().splitlines()
    # The first port was the run's own once it bound it: 64 more are held, no more (a host port
    # among them is refused as before).
    # A port below the unprivileged start (a resolver's 53) is never held for a run.
    assert lines == ["peer True", "received taken over", "held 64", "privileged ECONNREFUSED"], (
        run.stderr.decode()
    )
    assert taken_meanwhile == []
