"""Audit records sent off the machine as they are written, to a syslog receiver.

Whoever can rewrite the log as the server's user can rewrite its seal, and may cut its end back to
a checkpoint; a copy of each line already on another machine shows both. Each record's exact line
(so the copy verifies as a chain on its own) goes as one syslog message (RFC 5424 header, facility
`auth`), UDP, TCP (octet-counted framing, RFC 6587) or a local unix socket. Sending happens in a
thread of its own, from a bounded queue: a slow or absent receiver never holds a call up; what
cannot be queued or sent is counted and logged, never retried into the call path.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlsplit

from oct_mcp.diagnostics import get_logger
from oct_mcp.errors import ConfigError

__all__ = ["SyslogForwarder", "parse_syslog_address"]

_QUEUE_MAX: Final = 10_000
_CONNECT_TIMEOUT: Final = 3.0
_FACILITY_AUTH: Final = 4
_SEVERITY_NOTICE: Final = 5
_APP: Final = "oct-mcp"
_MSGID: Final = "audit"
_SCHEMES: Final = ("udp", "tcp", "unix")

_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class SyslogAddress:
    scheme: str
    host: str = ""
    port: int = 0
    path: str = ""


def parse_syslog_address(raw: str) -> SyslogAddress:
    """`udp://HOST:PORT`, `tcp://HOST:PORT` or `unix:///dev/log`.

    Raises:
        ConfigError: rule `audit_syslog_address`.
    """
    parts = urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme == "unix" and parts.path and not parts.netloc:
        return SyslogAddress(scheme="unix", path=parts.path)
    if parts.scheme in ("udp", "tcp") and parts.hostname and port:
        return SyslogAddress(scheme=parts.scheme, host=parts.hostname, port=port)
    raise ConfigError(
        f"audit_syslog_address {raw!r} must be udp://HOST:PORT, tcp://HOST:PORT or unix:///PATH",
        rule="audit_syslog_address",
    )


class SyslogForwarder:
    """Sends each audit line to a syslog receiver, from a thread of its own."""

    def __init__(self, address: SyslogAddress, *, replica: str | None = None) -> None:
        self.address = address
        self._hostname = (replica or socket.gethostname() or "-")[:255].replace(" ", "_")
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUE_MAX)
        self._socket: socket.socket | None = None
        self.dropped = 0
        """Lines not sent: the queue was full, or the receiver refused them."""
        self._thread = threading.Thread(target=self._run, name="audit-syslog", daemon=True)
        self._thread.start()

    def send(self, line: bytes) -> None:
        """Queue one record's line; never blocks, never raises."""
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self._drop("queue_full")

    def close(self, timeout: float = _CONNECT_TIMEOUT) -> None:
        """Send what is queued (for at most `timeout`), then stop."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def _drop(self, why: str) -> None:
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 1000 == 0:
            _log.error("audit_forward_dropped", why=why, dropped=self.dropped, to=self.address.scheme)

    def _message(self, line: bytes) -> bytes:
        stamp = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        pri = _FACILITY_AUTH * 8 + _SEVERITY_NOTICE
        header = f"<{pri}>1 {stamp} {self._hostname} {_APP} {os.getpid()} {_MSGID} - "
        return header.encode("ascii") + line

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            if line is None:
                break
            try:
                self._deliver(self._message(line))
            except OSError as exc:
                self._disconnect()
                self._drop(exc.strerror or type(exc).__name__)
        self._disconnect()

    def _deliver(self, message: bytes) -> None:
        address = self.address
        if self._socket is None:
            self._socket = self._connect()
        if address.scheme == "udp":
            self._socket.sendto(message, (address.host, address.port))
        elif address.scheme == "tcp":
            # Octet counting (RFC 6587 3.4.1): a line may hold any byte but a newline anyway.
            self._socket.sendall(f"{len(message)} ".encode("ascii") + message)
        else:
            self._socket.send(message)

    def _connect(self) -> socket.socket:
        address = self.address
        if address.scheme == "udp":
            family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
            return socket.socket(family, socket.SOCK_DGRAM)
        if address.scheme == "tcp":
            return socket.create_connection((address.host, address.port), timeout=_CONNECT_TIMEOUT)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            unix.connect(address.path)
        except OSError:
            unix.close()
            raise
        return unix

    def _disconnect(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
