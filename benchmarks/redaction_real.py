"""Redaction on real source trees: masks over code, files changed, MB/s, and what reading tokens costs.

Downloads pinned sdists of six projects with `pip download --no-deps --no-binary :all:` into a cache
folder outside the repository (`--cache`, default the user's cache folder), and redacts every text
file in them. Django, Flask, requests, SQLAlchemy, httpx, rich, redis-py, PyJWT and Authlib are held
out (issue 31): never tune on them, and they are not here.

Reports:
- masks over code: in Python files, a mask that covers anything but the inside of one string or one
  comment (read with `tokenize` over the whole file), each printed; goal 0.
- files changed: goal at most 0.5 %.
- MB/s of `redact()` over all the files.
- MB/s of `redact()` on text dense with secret-like words: every line of the sdists that names a
  password, secret, token, key, credential or auth (as test runs and logs of such code print them),
  with a secret drawn from `tests/secret_corpus.py`'s grammars after every 40 lines (all masked, or
  the row says so). Side by side in one run: `redact()`, `redact()` with the plain passes alone (a
  machine without the compiled passes' wheels: every line searched at every keyword), and detect-secrets
  1.5 (default plugins) on the same text written to a file; and `redact()` on that text seven times
  over (10 MB), whose MB/s must not fall with the length. Goal: 50 MB/s at least.
- MB/s on 1 and 10 MiB of generated env-dump text (`NAME=value` lines, a third secret-named,
  among test-run lines): the same rate on both says no pass grows faster than the text.
- the cost of the token-based decision (`code.expression`, run where a secret-named field's value
  is in doubt) on a 10,000-line Python file: the file cut from the sdists, and a file of nothing but
  secret-named assignments (the worst case), each against the engine with that decision left out
  (the decision before it), side by side in one run.

Every mask made is printed with its line, so each can be judged. With `--rounds 1` (the smoke
test) nothing is downloaded: the sdists already in the cache are used, and the 10,000-line rows
run on the generated file alone if there are none.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import interleave

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import secret_corpus
from detect_secrets.core.secrets_collection import SecretsCollection
from detect_secrets.settings import default_settings

from oct_mcp.redaction import detectors, redact
from oct_mcp.redaction.engine import PLAIN_PASSES

PROJECTS = (
    ("paramiko", "3.4.0"),
    ("celery", "5.3.6"),
    ("aiohttp", "3.9.5"),
    ("docker", "7.0.0"),
    ("twine", "5.0.0"),
    ("urllib3", "2.2.1"),
)
MORE = (
    ("oauthlib", "3.2.2"),
    ("requests-oauthlib", "2.0.0"),
    ("python-jose", "3.3.0"),
    ("passlib", "1.7.4"),
    ("itsdangerous", "2.2.0"),
    ("starlette", "0.41.3"),
    ("fastapi", "0.115.6"),
    ("boto", "2.49.0"),
    ("google-auth", "2.37.0"),
    ("msal", "1.31.1"),
)
"""A second tuning set, `--more`: projects whose code handles secrets (OAuth, JOSE, signing, cloud
credentials), where secret-named names and keys built in code are most common."""
HELD_OUT = (
    ("Django", "5.1.4"),
    ("Flask", "3.0.3"),
    ("requests", "2.32.3"),
    ("SQLAlchemy", "2.0.36"),
    ("httpx", "0.27.2"),
    ("rich", "13.9.4"),
    ("redis", "5.2.1"),
    ("PyJWT", "2.10.1"),
    ("Authlib", "1.3.2"),
)
"""Issue 31's held-out projects: measured with `--held-out` (figures only, no mask printed), never
tuned on."""
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:")
MAX_FILE = 2 * 1024 * 1024
LINES = 10_000
GOAL_CHANGED = 0.005
GOAL_DENSE_MB_S = 50.0
SECRET_WORDS = re.compile(r"(?i)pass|pwd|secret|token|key|cred|auth")
SECRET_EVERY = 40


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median taken)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oct-mcp-bench" / "sdists"
    parser.add_argument("--cache", type=Path, default=cache, help="where the sdists are kept")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="only the files-changed figures of the held-out projects, with no mask printed",
    )
    parser.add_argument(
        "--more",
        action="store_true",
        help="only the files-changed figures of the second tuning set, masks printed",
    )
    return parser.parse_args()


def changed_figures(cache: Path, projects: tuple[tuple[str, str], ...], label: str, shown: bool) -> None:
    """Files changed and masks over code on `projects`; each mask printed only when `shown` (never
    for the held-out projects, so no one tunes on them)."""
    files: list[tuple[str, str]] = []
    for name, version in projects:
        path = sdist(cache, name, version, download=True)
        assert path is not None, f"{name}=={version} did not download"
        files.extend(texts(path))
    changed = keys_only = over = 0
    for name, text in files:
        findings = redact(text)[1]
        if not findings:
            continue
        changed += 1
        keys_only += all(finding.kind == "private_key" for finding in findings)
        literals = literal_spans(text) if name.endswith((".py", ".pyi")) else None
        code = over_code(text, findings, literals) if literals is not None else []
        over += len(code)
        for finding in findings if shown else ():
            number, line = line_of(text, finding.start)
            mark = "CODE " if finding in code else ""
            print(f"mask {mark}{finding.kind} {name}:{number}: {line.strip()[:160]}")
    others = changed - keys_only
    pins = ", ".join(f"{name} {version}" for name, version in projects)
    print(f"{label} ({pins}): {len(files)} text files")
    print(f"masks over code: {over}; files changed: {changed} ({changed / len(files):.2%})")
    print(f"  only by private key blocks: {keys_only}; the rest: {others} ({others / len(files):.2%})")


def sdist(cache: Path, name: str, version: str, download: bool) -> Path | None:
    for suffix in (".tar.gz", ".zip"):
        # As the index names it, or normalised (PEP 625: lower case, `_` for `-`).
        for stem in (f"{name}-{version}", f"{name.lower().replace('-', '_')}-{version}"):
            path = cache / (stem + suffix)
            if path.exists():
                return path
    if not download:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [*PIP_DOWNLOAD, "-d", str(cache), f"{name}=={version}"],
        check=True,
        capture_output=True,
    )
    return sdist(cache, name, version, download=False)


def texts(path: Path) -> list[tuple[str, str]]:
    """(member name, text) of every UTF-8 text file in the sdist."""
    found = []
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            if not member.isfile() or member.size > MAX_FILE:
                continue
            data = archive.extractfile(member)
            if data is None:
                continue
            raw = data.read()
            if b"\0" in raw:
                continue
            try:
                found.append((member.name, raw.decode("utf-8")))
            except UnicodeDecodeError:
                continue
    return found


def literal_spans(text: str) -> list[tuple[int, int]] | None:
    """The (start, end) of each string and comment token of a Python file; None: it does not tokenize."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.STRING, tokenize.COMMENT):
                start = starts[token.start[0] - 1] + token.start[1]
                end = starts[token.end[0] - 1] + token.end[1]
                spans.append((start, end))
    except (tokenize.TokenError, SyntaxError):
        return None
    return spans


def over_code(text: str, findings: Any, literals: list[tuple[int, int]]) -> list[Any]:
    return [
        finding
        for finding in findings
        if not any(start <= finding.start and finding.end <= end for start, end in literals)
    ]


def line_of(text: str, offset: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, offset) + 1
    stop = text.find("\n", offset)
    return text.count("\n", 0, offset) + 1, text[start : stop if stop != -1 else len(text)]


def without_tokens() -> Callable[[], None]:
    """Leave the token-based decision out (as before it), and return what puts it back."""
    original = detectors._code_value
    detectors._code_value = lambda _match, _group: None  # type: ignore[assignment]

    def restore() -> None:
        detectors._code_value = original

    return restore


def generated_python() -> str:
    """10,000 lines of secret-named assignments: every one is a field the detectors look at."""
    shapes = (
        'self.password = password or ""',
        'token = prefix + " " + suffix',
        "expected_key = Storage.prefix + folder + key",
        "private_key: Ed25519PrivateKey | Ed448PrivateKey | None = None",
        'auth_token = f"Bearer {token}"',
        "secret = settings.SECRET_KEY if use_settings else default_secret",
        'api_key = "Zx8Qw2Lp9Rt4Yu6Io1Pa"',
        "    def check_password(self, raw_password):",
        "    return hashlib.sha256(password.encode()).hexdigest()",
        "x = compute(1, 2)",
    )
    return "\n".join(shapes[index % len(shapes)] for index in range(LINES)) + "\n"


def time_of(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def compare(text: str, rounds: int) -> tuple[float, float]:
    def with_tokens() -> float:
        return time_of(lambda: redact(text))

    def before() -> float:
        restore = without_tokens()
        try:
            return time_of(lambda: redact(text))
        finally:
            restore()

    subject, reference = interleave(rounds, [with_tokens, before])
    return statistics.median(subject), statistics.median(reference)


def dense_text(files: list[tuple[str, str]]) -> secret_corpus.Sample:
    """The sdists' lines that name a secret-like word, with a generated secret after every 40."""
    rng = random.Random(31)  # fake secrets, reproducible on purpose
    pieces: list[str] = []
    labels: list[tuple[int, int, str]] = []
    total = 0
    count = 0
    for _name, text in files:
        for line in text.splitlines():
            if not SECRET_WORDS.search(line):
                continue
            pieces.append(line + "\n")
            total += len(line) + 1
            count += 1
            if count % SECRET_EVERY == 0:
                sample = secret_corpus.place(rng.choice(secret_corpus.FORMATS), rng)
                labels.extend((start + total, end + total, kind) for start, end, kind in sample.secrets)
                pieces.append(sample.text + "\n")
                total += len(sample.text) + 1
    return secret_corpus.Sample("".join(pieces), tuple(labels))


def detect_secrets_time(path: Path) -> float:
    with default_settings():
        return time_of(lambda: SecretsCollection().scan_file(str(path)))


def env_dump(size: int) -> str:
    """`printenv` and test-run lines of about `size` characters, a third of them secret-named entries
    alone on their line with generated values: the densest secrets a tool's output holds."""
    rng = random.Random(32)  # generated values, reproducible on purpose
    names = ("DB_PASSWORD", "API_TOKEN", "SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "REDIS_PASS")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    lines: list[str] = []
    total = 0
    while total < size:
        if rng.random() < 0.3:
            line = f"{rng.choice(names)}={''.join(rng.choice(alphabet) for _ in range(24))}"
        else:
            test = f"tests/test_auth.py::test_token_refresh_{rng.randrange(10**6)}"
            line = f"{test} PASSED [{rng.randrange(100):3d}%]"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def env_dump_figures(rounds: int) -> None:
    """MB/s on 1 MB and 10 MB of env-dump text: a pass that grows faster than its text shows here."""
    print()
    print("| generated env dump (a secret every ~200 bytes) | MB/s (median) | masks |")
    print("|---|---|---|")
    for size in (1 << 20, 10 << 20):
        text = env_dump(size)
        _redacted, findings = redact(text)
        times = [time_of(lambda text=text: redact(text)) for _ in range(max(1, rounds // 2))]
        print(f"| {size >> 20} MiB | {len(text) / statistics.median(times) / 1e6:.1f} | {len(findings)} |")


def dense_figures(files: list[tuple[str, str]], rounds: int) -> None:
    sample = dense_text(files)
    text = sample.text
    size = len(text.encode("utf-8"))
    redacted, findings = redact(text)
    masked = secret_corpus.fully_masked(sample.secrets, [(f.start, f.end) for f in findings])
    assert redact(text, PLAIN_PASSES)[0] == redacted, "the compiled passes changed the output"
    non_ascii = sum(not char.isascii() for char in text)

    def plain() -> float:
        return time_of(lambda: redact(text, PLAIN_PASSES))

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dense.txt"
        path.write_text(text, encoding="utf-8")
        subject, old, reference = interleave(
            rounds, [lambda: time_of(lambda: redact(text)), plain, lambda: detect_secrets_time(path)]
        )
    rate = size / statistics.median(subject) / 1e6
    verdict = "met" if rate >= GOAL_DENSE_MB_S else "MISSED"
    print()
    print(
        f"dense text: {size / 1e6:.1f} MB, {text.count(chr(10))} lines (a secret-like word or a secret), "
        f"{non_ascii} non-ASCII characters, {len(sample.secrets)} secrets, "
        f"{sum(masked)} masked whole"
    )
    print("| dense text | MB/s (median) | time a byte, against redact() |")
    print("|---|---|---|")
    print(f"| redact() | {rate:.1f} (goal >= {GOAL_DENSE_MB_S:.0f}: {verdict}) | 1 |")
    # The same text seven times over, 10 MB: time a pass that grows faster than the text would show.
    seven = "".join([text] * 7)
    long_rate = (
        len(seven.encode("utf-8"))
        / statistics.median([time_of(lambda: redact(seven)) for _ in range(max(1, rounds // 2))])
        / 1e6
    )
    print(
        f"| redact(), the text seven times ({len(seven) / 1e6:.0f} MB) | {long_rate:.1f} | "
        f"{rate / long_rate:.2f} |"
    )
    for label, times in (
        ("redact(), the plain passes alone (no wheels)", old),
        ("detect-secrets 1.5, default plugins", reference),
    ):
        print(
            f"| {label} | {size / statistics.median(times) / 1e6:.2f} | "
            f"{statistics.median(times) / statistics.median(subject):.2f} |"
        )


def main() -> None:
    args = parse()
    if args.held_out or args.more:
        projects, label = (HELD_OUT, "held out") if args.held_out else (MORE, "second tuning set")
        changed_figures(args.cache, projects, label, shown=not args.held_out)
        return
    smoke = args.rounds == 1
    files: list[tuple[str, str]] = []
    for name, version in PROJECTS:
        path = sdist(args.cache, name, version, download=not smoke)
        if path is None:
            print(f"{name}=={version}: not in the cache (run without --rounds 1 to download)")
            continue
        found = texts(path)
        files.extend(found)
        print(f"{name}=={version}: {len(found)} text files")

    total_bytes = sum(len(text.encode("utf-8")) for _name, text in files)
    changed = 0
    keys_only = 0
    code_masks: list[tuple[str, Any]] = []
    masks = 0
    unclassified = 0
    for name, text in files:
        _redacted, findings = redact(text)
        if not findings:
            continue
        changed += 1
        if all(finding.kind == "private_key" for finding in findings):
            keys_only += 1
        masks += len(findings)
        literals = literal_spans(text) if name.endswith((".py", ".pyi")) else None
        if literals is None:
            unclassified += len(findings)
            over: list[Any] = []
        else:
            over = over_code(text, findings, literals)
            code_masks.extend((name, finding) for finding in over)
        for finding in findings:
            number, line = line_of(text, finding.start)
            mark = "CODE " if finding in over else ""
            print(f"mask {mark}{finding.kind} {name}:{number}: {line.strip()[:160]}")
    if files:

        def every_file() -> float:
            return time_of(lambda: [redact(text) for _name, text in files])

        def every_file_plain() -> float:
            return time_of(lambda: [redact(text, PLAIN_PASSES) for _name, text in files])

        passes, passes_plain = interleave(args.rounds, [every_file, every_file_plain])
        rate = total_bytes / statistics.median(passes) / 1e6
        rate_plain = total_bytes / statistics.median(passes_plain) / 1e6
        share = changed / len(files)
        print()
        print(
            f"files: {len(files)}, {total_bytes / 1e6:.1f} MB; masks: {masks} ({unclassified} outside Python)"
        )
        print(f"masks over code: {len(code_masks)} (goal 0)")
        for name, finding in code_masks:
            number, line = line_of(dict(files)[name], finding.start)
            print(f"  {name}:{number}: {line.strip()[:160]}")
        verdict = "met" if share <= GOAL_CHANGED else "MISSED"
        print(f"files changed: {changed} ({share:.2%}, goal <= {GOAL_CHANGED:.1%}: {verdict})")
        others = changed - keys_only
        print(
            f"  of which only private key blocks (test keys, real by their format): {keys_only}; "
            f"the rest: {others} ({others / len(files):.2%})"
        )
        print(
            f"redact(): {rate:.1f} MB/s over the sdists; with the plain passes alone (no wheels): "
            f"{rate_plain:.1f} MB/s, ratio {rate / rate_plain:.2f}"
        )

    if files:
        dense_figures(files, args.rounds)
    env_dump_figures(args.rounds)

    samples = [("generated: secret-named assignments only", generated_python())]
    python = "".join(text for name, text in files if name.endswith(".py"))
    if python:
        cut = "\n".join(python.split("\n")[:LINES]) + "\n"
        samples.insert(0, ("cut from the sdists' Python files", cut))
    print()
    print(f"rounds: {args.rounds}, cores: {os.cpu_count()}")
    print(f"| {LINES:,}-line Python file | with the token decision | without (before) | ratio |")
    print("|---|---|---|---|")
    for label, text in samples:
        subject, reference = compare(text, args.rounds)
        print(f"| {label} | {subject * 1e3:.2f} ms | {reference * 1e3:.2f} ms | {subject / reference:.3f} |")


if __name__ == "__main__":
    main()
