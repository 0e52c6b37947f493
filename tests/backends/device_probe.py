"""Run inside a sandbox by test_devices.py: each device use a test suite makes, as one JSON line.

Arguments: the number of a pty opened outside the run, the name of a shared memory segment made
outside it, a name for a segment the run leaves behind. Each probe prints "OK ..." or
"ERR <exception>"; the pts probe comes first, before the run opens a pty of its own that could
take the same number.
"""

import _posixshmem
import ctypes
import fcntl
import json
import multiprocessing
import os
import pty
import select
import stat
import sys
from multiprocessing import shared_memory

TIOCSTI = 0x5412
results = {}


def probe(name, action):
    try:
        results[name] = "OK " + str(action())
    except Exception as exc:  # noqa: BLE001 - the probe reports every refusal by its type
        results[name] = "ERR " + type(exc).__name__


def read_until(fd, wanted):
    seen = b""
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], 10)
        if not ready:
            return seen
        chunk = os.read(fd, 1024)
        if not chunk:
            return seen
        seen += chunk
    return seen


def other_pts():
    fd = os.open(f"/dev/pts/{sys.argv[1]}", os.O_RDWR | os.O_NOCTTY)
    os.close(fd)
    return "opened"


def pair_round_trip():
    master, slave = os.openpty()
    os.write(slave, b"ping\n")
    return read_until(master, b"ping").strip().decode()


def forkpty_echo():
    pid, master = os.forkpty()
    if pid == 0:
        os.write(1, b"child:" + str(int(os.isatty(0))).encode() + b"\n")
        os._exit(0)
    seen = read_until(master, b"\n")
    os.waitpid(pid, 0)
    return seen.strip().decode()


def spawned_echo():
    # What pexpect and ptyprocess do: fork on a pty, exec a program, talk to it through the master.
    pid, master = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", "print('got', input())"])  # noqa: S606 - fixed argv
    os.write(master, b"hello\n")
    seen = read_until(master, b"got hello")
    os.waitpid(pid, 0)
    return "got hello" in seen.decode()


def typed_into_terminal():
    with open(os.devnull, "rb") as null:
        fcntl.ioctl(null.fileno(), TIOCSTI, b"x")


def typed_into_own_pty():
    _, slave = os.openpty()
    fcntl.ioctl(slave, TIOCSTI, b"x")


def double(value):
    return value * 2


def pool(method):
    with multiprocessing.get_context(method).Pool(2) as workers:
        return workers.map(double, [1, 2])


def manager():
    with multiprocessing.Manager() as shared:
        return dict(shared.dict(a=1))


def own_segment():
    segment = shared_memory.SharedMemory(create=True, size=16)
    segment.buf[:2] = b"ok"
    name = segment.name
    segment.close()
    segment.unlink()
    return name.startswith("psm_")


def named_semaphore():
    # sem_open by name, as a C extension does: made, opened again by its name, counted, removed.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sem_open.restype = ctypes.c_void_p
    libc.sem_open.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint)
    name = f"/oct-probe-{os.getpid()}".encode()
    made = libc.sem_open(name, os.O_CREAT | os.O_EXCL, 0o600, 1)
    if made in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "sem_open")
    again = libc.sem_open(name, 0, 0, 0)
    if again in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "sem_open")
    libc.sem_post(ctypes.c_void_p(again))
    value = ctypes.c_int()
    libc.sem_getvalue(ctypes.c_void_p(made), ctypes.byref(value))
    libc.sem_close(ctypes.c_void_p(again))
    libc.sem_close(ctypes.c_void_p(made))
    if libc.sem_unlink(name) != 0:
        raise OSError(ctypes.get_errno(), "sem_unlink")
    return value.value


if __name__ == "__main__":
    probe("other pts", other_pts)
    probe("pair", pair_round_trip)
    probe("forkpty", forkpty_echo)
    probe("spawn", spawned_echo)
    probe("TIOCSTI", typed_into_terminal)
    probe("TIOCSTI own pty", typed_into_own_pty)
    probe("list /dev", lambda: "null" in os.listdir("/dev"))
    probe("block device", lambda: stat.S_ISBLK(os.stat("/dev/null").st_mode))
    # Opened by its path: attaching through SharedMemory would have the resource tracker unlink it.
    probe("other segment", lambda: os.close(os.open(f"/dev/shm/{sys.argv[2]}", os.O_RDWR)))
    probe("other segment by shm_open", lambda: os.close(_posixshmem.shm_open(f"/{sys.argv[2]}", os.O_RDWR)))
    probe("lock", lambda: bool(multiprocessing.Lock()))
    for method in ("fork", "spawn", "forkserver"):
        probe(f"pool {method}", lambda method=method: pool(method))
    probe("manager", manager)
    probe("shared_memory", own_segment)
    probe("named semaphore", named_semaphore)
    # Left behind on purpose: the harness looks for it outside the run.
    left = f"/{sys.argv[3]}"
    probe("leave segment", lambda: os.close(_posixshmem.shm_open(left, os.O_RDWR | os.O_CREAT, 0o600)))
    print(json.dumps(results))
