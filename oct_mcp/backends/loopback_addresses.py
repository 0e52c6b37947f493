"""Sockaddrs as the loopback supervisor reads them: which are loopback, and who would receive on `lo`.

Pure functions over the bytes the supervisor copied out of the run (`loopback_calls`), and one
netlink query (sock_diag) for the socket a loopback address reaches.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from functools import cache
from typing import Final

from oct_mcp.backends.libc import libc

__all__ = [
    "LOOPBACK_DEVICE",
    "MAX_ADDRESS",
    "NETLINK_SOCK_DIAG",
    "destination_of",
    "family_of",
    "is_loopback",
    "is_stream",
    "on_loopback",
    "port_of",
    "receiver_of",
    "source_of",
    "unix_path",
    "unprivileged_port_start",
]

MAX_ADDRESS: Final = 128
LOOPBACK_DEVICE: Final = b"lo"
NETLINK_SOCK_DIAG: Final = 4
_SOCK_DIAG_BY_FAMILY: Final = 20
_NLM_F_REQUEST: Final = 1
_NLMSG_ERROR: Final = 2
_ALL_STATES: Final = 0xFFFFFFFF
_NO_COOKIE: Final = 0xFFFFFFFF
_V4_MAPPED: Final = bytes(10) + b"\xff\xff"
_V6_LOOPBACK: Final = bytes(15) + b"\x01"


@cache
def unprivileged_port_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as file:
            return int(file.read())
    except (OSError, ValueError):
        return 1024


def is_loopback(address: bytes) -> bool:
    """Whether a copied sockaddr names a loopback address (IPv4, IPv6 or IPv4-mapped IPv6)."""
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET and len(address) >= 8:
        return address[4] == 127
    if family == socket.AF_INET6 and len(address) >= 24:
        host = address[8:24]
        return host == _V6_LOOPBACK or (host[:12] == _V4_MAPPED and host[12] == 127)
    return False


def port_of(address: bytes) -> int:
    return int.from_bytes(address[2:4], "big")


def on_loopback(address: bytes) -> bytes:
    """A copied sockaddr with the wildcard host (`0.0.0.0`, `::`, `::ffff:0.0.0.0`) made loopback's.

    A test server binds the wildcard as often as loopback (`""` is Python's default host), and
    is reached by its clients on `127.0.0.1` or `localhost` either way: bound to loopback it serves
    them all the same, and no other address of the machine. Any other host is left as it is.
    """
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET and len(address) >= 8 and address[4:8] == bytes(4):
        return address[:4] + b"\x7f\0\0\x01" + address[8:]
    if family == socket.AF_INET6 and len(address) >= 24:
        host = address[8:24]
        if host == bytes(16):
            return address[:8] + _V6_LOOPBACK + address[24:]
        if host == _V4_MAPPED + bytes(4):
            return address[:8] + _V4_MAPPED + b"\x7f\0\0\x01" + address[24:]
    return address


def family_of(address: bytes) -> int:
    return int.from_bytes(address[:2], "little")


def unix_path(address: bytes) -> bytes | None:
    """The path of a unix sockaddr; None for an abstract name or none (autobind)."""
    path = address[2:].split(b"\0", 1)[0]
    return path or None


def destination_of(address: bytes) -> tuple[int, bytes, int]:
    """Family, host (16 bytes) and port of a loopback sockaddr; IPv4-mapped counts as IPv4, as sent."""
    family = int.from_bytes(address[:2], "little")
    if family == socket.AF_INET:
        return socket.AF_INET, address[4:8].ljust(16, b"\0"), port_of(address)
    host = address[8:24]
    if host[:12] == _V4_MAPPED:
        return socket.AF_INET, host[12:].ljust(16, b"\0"), port_of(address)
    return socket.AF_INET6, host, port_of(address)


def source_of(fd: int, family: int) -> tuple[bytes, int]:
    """Where a datagram from `fd` comes from (a connected receiver accepts only its peer); zero if unbound."""
    buffer = ctypes.create_string_buffer(MAX_ADDRESS)
    size = ctypes.c_uint32(MAX_ADDRESS)
    if libc().getsockname(fd, buffer, ctypes.byref(size)) < 0 or size.value < 8:
        return bytes(16), 0
    bound = buffer.raw[: size.value]
    if int.from_bytes(bound[:2], "little") not in (socket.AF_INET, socket.AF_INET6):
        return bytes(16), 0
    found, host, port = destination_of(bound)
    return (host, port) if found == family else (bytes(16), 0)


def receiver_of(
    diag: socket.socket, family: int, stream: bool, destination: tuple[bytes, int], source: tuple[bytes, int]
) -> int | None:
    """The inode of the socket that would receive on `lo` from `source` at `destination`, or None."""
    host, port = destination
    origin, origin_port = source
    tail = struct.pack("=III", loopback_index(), _NO_COOKIE, _NO_COOKIE)
    if stream:
        # TCP looks up a packet from dst:dport to src:sport: the listener is the "source".
        sockid = struct.pack("!HH", port, origin_port) + host + origin + tail
        protocol = socket.IPPROTO_TCP
    else:
        # UDP looks up a packet from src:sport to dst:dport.
        sockid = struct.pack("!HH", origin_port, port) + origin + host + tail
        protocol = socket.IPPROTO_UDP
    request = struct.pack("=BBBBI", family, protocol, 0, 0, _ALL_STATES) + sockid
    diag.send(struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 0, 0) + request)
    answer = diag.recv(8192)
    if len(answer) < 16 or struct.unpack_from("=H", answer, 4)[0] == _NLMSG_ERROR:
        return None
    return int(struct.unpack_from("=I", answer, 16 + 68)[0]) if len(answer) >= 16 + 72 else None


@cache
def loopback_index() -> int:
    return socket.if_nametoindex(LOOPBACK_DEVICE.decode())


def is_stream(fd: int) -> bool:
    kind = ctypes.c_int()
    size = ctypes.c_uint32(4)
    libc().getsockopt(fd, socket.SOL_SOCKET, socket.SO_TYPE, ctypes.byref(kind), ctypes.byref(size))
    return kind.value == socket.SOCK_STREAM
