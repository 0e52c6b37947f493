"""Loopback supervision on landlock: what it adds to a spawn, and to a loopback connect, side by side.

Spawn: /usr/bin/true under landlock without network, with the supervisor (the default where the
kernel can; it also answers ptys, /dev/shm and scratch chmods) against the same run without it
(TCP, UDP, ptys and /dev/shm refused, as before), and a bare subprocess. Goal: the supervisor
adds <= 2 ms a spawn.

Per call, inside one run: a loopback TCP round (socket, connect, accept, close) and a UDP sendto
with an address, under the supervisor against the same code in a bare subprocess. No goal: the
figure is what a socket-heavy test suite pays per call.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
from _common import Comparison, arguments, interleave, print_table
from sandbox_spawn import _timed, read_only_prepared

from oct_mcp.backends import Prepared
from oct_mcp.backends.landlock import LandlockBackend
from oct_mcp.backends.loopback import loopback_support
from oct_mcp.backends.runner import run_prepared

CALLS = 400
CALL_PROBE = f"""
import json, socket, time
server = socket.create_server(("127.0.0.1", 0), backlog=512)
tcp = []
for _ in range({CALLS}):
    started = time.perf_counter()
    client = socket.socket()
    client.connect(server.getsockname())
    server.accept()[0].close()
    tcp.append(time.perf_counter() - started)
    client.close()
receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
receiver.bind(("127.0.0.1", 0))
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp = []
for _ in range({CALLS}):
    started = time.perf_counter()
    sender.sendto(b"x", receiver.getsockname())
    udp.append(time.perf_counter() - started)
    receiver.recv(1)
print(json.dumps({{"tcp": tcp, "udp": udp}}))
"""


def _unsupervised(prepared: Prepared) -> Prepared:
    return dataclasses.replace(
        prepared,
        confinement=dataclasses.replace(prepared.confinement, supervised=False),  # type: ignore[type-var]
    )


def _per_call(prepared: Prepared) -> dict[str, list[float]]:
    async def once() -> dict[str, list[float]]:
        result = await run_prepared(prepared, backend="landlock", time_limit=60, max_output=1 << 22)
        if result.exit_code != 0:
            raise RuntimeError(f"probe failed: {result.stderr!r}")
        found: dict[str, list[float]] = json.loads(result.stdout)
        return found

    return anyio.run(once)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=41)
    landlock = LandlockBackend()
    if not landlock.probe().usable or loopback_support() is not None:
        print(f"loopback supervision does not work here: {loopback_support()}; not measured")
        return
    comparisons: list[Comparison] = []
    with tempfile.TemporaryDirectory() as temp:
        project = Path(temp).resolve()
        argv = ("/usr/bin/true",)
        bare = Prepared(argv=argv, env={}, cwd=project, guarantees=frozenset())
        supervised = read_only_prepared(landlock, project, argv)
        refused = _unsupervised(supervised)
        measures = [
            lambda: _timed(bare, "bare"),
            lambda: _timed(refused, "landlock"),
            lambda: _timed(supervised, "landlock"),
        ]
        for measure in measures:
            measure()  # warm-up
        samples = interleave(args.rounds, measures)
        extra_ms = (statistics.median(samples[2]) - statistics.median(samples[1])) * 1e3
        comparisons.append(
            Comparison("landlock spawn, supervised / unsupervised", samples[2], samples[1], goal=float("inf"))
        )
        comparisons.append(
            Comparison("landlock spawn, supervised / bare", samples[2], samples[0], goal=float("inf"))
        )

        probe = (sys.executable, "-I", "-c", CALL_PROBE)
        inside = _per_call(read_only_prepared(landlock, project, probe))
        outside = _per_call(Prepared(argv=probe, env={}, cwd=project, guarantees=frozenset()))
        for kind, claim in (("tcp", "loopback TCP connect+accept"), ("udp", "loopback UDP sendto")):
            comparisons.append(
                Comparison(
                    f"{claim}, supervised / bare", inside[kind], outside[kind], goal=float("inf"), unit="us"
                )
            )
    print_table(comparisons, args.rounds)
    verdict = "met" if extra_ms <= 2 else "MISSED"
    print(f"the loopback supervisor adds {extra_ms:.2f} ms per landlock spawn (goal: <= 2 ms): {verdict}")
    print(f"per call: medians of {CALLS} calls in one run each")


if __name__ == "__main__":
    main()
