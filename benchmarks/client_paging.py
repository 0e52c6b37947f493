"""oct_list_files and oct_search as a host sees them: the SDK client over stdio, paged to the end, on
a real tree, side by side with ripgrep in the same run.

The tree is Django 5.1.4's sdist (6,809 files, 71 MB), downloaded once with `pip download --no-deps
--no-binary :all:`, checked against its pinned SHA-256 and kept in a cache folder outside the
repository (`--cache`, default the user's cache folder). `oct-mcp serve` runs as a host starts it,
reached with the official SDK client (`ClientSession` over `stdio_client`), which lists the tools
first and checks every structured result against its tool's output schema, as Python hosts do. Each
round pages to the end by `next_cursor`:

- `oct_list_files {}` against `rg --files --hidden --glob '!.git'`;
- `oct_search` of a literal (`ValidationError`, about 1,300 lines) against `rg --json -F`;
- `oct_search` of a regex (`class \\w+\\(models\\.Model\\):`, about 2,400 lines) against `rg --json`.

ripgrep runs as a subprocess from the same process, interleaved with the pages (shuffled order each
round, medians). With `--before DIR`, a second server runs another version of the package (say the
last release, unpacked with `git archive`) and is paged in the same rounds, so a change is measured
side by side. The rate limit is raised in the server's config so paging is never refused. With
`--rounds 1` (the smoke test) nothing is downloaded: without the sdist in the cache, a generated tree
of 2,000 files stands in.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final

import anyio
from _common import Comparison, interleave_async, print_table
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SDIST: Final = "Django-5.1.4.tar.gz"
SDIST_SHA256: Final = "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a"
PIP_DOWNLOAD: Final = (sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:")
LITERAL: Final = "ValidationError"
REGEX: Final = r"class \w+\(models\.Model\):"
GOAL: Final = 2.0
"""Issue 33: paged to the end through the SDK client, at most twice ripgrep."""


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median taken)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oct-mcp-bench" / "sdists"
    parser.add_argument("--cache", type=Path, default=cache, help="where the sdist is kept")
    parser.add_argument(
        "--before",
        type=Path,
        help="a folder holding another version of the `oct_mcp` package (`git archive REV oct_mcp | tar x "
        "-C DIR`): its server is paged in the same rounds, and the change between them shown",
    )
    return parser.parse_args()


def sdist(cache: Path, download: bool) -> Path | None:
    """The pinned sdist from the cache, downloaded first if allowed; refused if its digest differs."""
    path = cache / SDIST
    if not path.exists():
        if not download:
            return None
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([*PIP_DOWNLOAD, "-d", str(cache), "django==5.1.4"], check=True, capture_output=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{path} is not the pinned sdist (sha256 {digest}); delete it to download again")
    return path


def unpacked(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / SDIST.removesuffix(".tar.gz")


def generated(root: Path) -> Path:
    """A stand-in tree for the smoke run: 2,000 files in 40 folders, a few lines matching each query."""
    for n in range(2000):
        folder = root / f"pkg{n % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        body = f"def f{n}():\n    return {n}\n"
        if n % 9 == 0:
            body += "raise ValidationError('x')\nclass Item(models.Model):\n"
        (folder / f"m{n:04}.py").write_text(body)
    return root


def rg_binary() -> str:
    found = shutil.which("rg", path=str(Path(sys.executable).parent)) or shutil.which("rg")
    if found is None:
        raise SystemExit("ripgrep is not installed: pip install ripgrep")
    return found


async def timed_run(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    await anyio.run_process(argv, cwd=cwd, check=True)
    return time.perf_counter() - start


class Pager:
    """Pages a tool to the end through the SDK client, counting its pages and entries."""

    def __init__(self, session: ClientSession, tool: str, arguments: dict[str, Any], entries: str) -> None:
        self.session, self.tool, self.arguments, self.entries = session, tool, arguments, entries
        self.pages = self.count = 0

    async def __call__(self) -> float:
        start = time.perf_counter()
        arguments: dict[str, Any] = dict(self.arguments)
        pages = count = 0
        while True:
            result = await self.session.call_tool(self.tool, arguments)
            structured = getattr(result, "structured_content", None)
            if getattr(result, "is_error", False) or not isinstance(structured, dict):
                raise SystemExit(f"{self.tool} failed: {result}")
            pages += 1
            count += len(structured[self.entries])
            cursor = structured.get("next_cursor")
            if cursor is None:
                break
            arguments = {**self.arguments, "cursor": cursor}
        elapsed = time.perf_counter() - start
        self.pages, self.count = pages, count
        return elapsed


def rg_lines(rg: str, argv: list[str], root: Path) -> int:
    done = subprocess.run([rg, *argv], cwd=root, capture_output=True, check=True)
    if "--json" in argv:
        return sum(json.loads(line)["type"] == "match" for line in done.stdout.splitlines())
    return len(done.stdout.splitlines())


FIGURES: Final = {
    "listing": ("oct_list_files paged to the end", "oct_list_files", {}, "files", "`rg --files`"),
    "literal": (
        f"oct_search `{LITERAL}` paged to the end",
        "oct_search",
        {"pattern": LITERAL},
        "matches",
        "`rg --json -F`",
    ),
    "regex": (
        "oct_search regex paged to the end",
        "oct_search",
        {"pattern": REGEX, "regex": True},
        "matches",
        "`rg --json`",
    ),
}
REFERENCES: Final = {
    "listing": ["--files", "--hidden", "--glob", "!.git"],
    "literal": ["--json", "--hidden", "--glob", "!.git", "-F", LITERAL],
    "regex": ["--json", "--hidden", "--glob", "!.git", REGEX],
}


def server_parameters(root: Path, config: Path, source: Path | None) -> StdioServerParameters:
    """`oct-mcp serve` as a host starts it; with `source`, the package from that checkout instead."""
    argv = ["-m", "oct_mcp", "serve", "--project-root", str(root), "--config", str(config)]
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if source is not None:
        environ["PYTHONPATH"] = str(source)
    return StdioServerParameters(command=sys.executable, args=argv, env=environ, cwd=str(root))


async def measure(
    root: Path, work: Path, rounds: int, before: Path | None
) -> tuple[list[Comparison], list[tuple[str, Pager, int]]]:
    rg = rg_binary()
    config = work / "config.json"
    settings = {"audit_log_path": str(work / "audit.log"), "rate_limit_per_minute": 10_000}
    config.write_text(json.dumps(settings))
    sources: list[Path | None] = [None] if before is None else [None, before]
    async with AsyncExitStack() as stack:
        pagers: list[dict[str, Pager]] = []
        for source in sources:
            read, write = await stack.enter_async_context(
                stdio_client(server_parameters(root, config, source))
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            # As a host does: the output schemas the client checks each result against come from here.
            await session.list_tools()
            pagers.append(
                {
                    name: Pager(session, tool, arguments, entries)
                    for name, (_, tool, arguments, entries, _) in FIGURES.items()
                }
            )
        measures: list[Callable[[], Awaitable[float]]] = []
        for name in FIGURES:
            for server in pagers:
                await server[name]()  # warm: the tree in the page cache, the helper started
                measures.append(server[name])
            measures.append(lambda name=name: timed_run([rg, *REFERENCES[name]], root))
        samples = iter(await interleave_async(rounds, measures))
    comparisons: list[Comparison] = []
    counts: list[tuple[str, Pager, int]] = []
    for name, (claim, *_, reference) in FIGURES.items():
        ours = next(samples)
        earlier = next(samples) if before is not None else None
        theirs = next(samples)
        comparisons.append(Comparison(f"{claim} / {reference}", ours, theirs, GOAL))
        if earlier is not None:
            comparisons.append(Comparison(f"{claim}, before the change / {reference}", earlier, theirs, GOAL))
            comparisons.append(Comparison(f"{claim}, this checkout / before the change", ours, earlier, 1.0))
        counts.append((claim, pagers[0][name], rg_lines(rg, REFERENCES[name], root)))
    return comparisons, counts


def main() -> None:
    args = parse()
    archive = sdist(args.cache, download=args.rounds > 1)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if archive is None:
            root = generated(work / "tree")
            print("tree: generated stand-in (the Django sdist is not in the cache)")
        else:
            root = unpacked(archive, work)
            print(f"tree: {SDIST} (sha256 {SDIST_SHA256[:12]}...)")
        comparisons, counts = anyio.run(measure, root, work, args.rounds, args.before)
    print_table(comparisons, args.rounds)
    print()
    print("| figure | pages | entries shown | ripgrep's |")
    print("|---|---|---|---|")
    for claim, pager, reference in counts:
        print(f"| {claim} | {pager.pages} | {pager.count} | {reference} |")


if __name__ == "__main__":
    main()
