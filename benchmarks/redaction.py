"""Redaction: `redact` against detect-secrets 1.5 (default plugins) on the same tool output, and quality.

Throughput, on two bulks of 10 MiB: realistic tool output (git logs, pytest runs, lockfiles,
tracebacks, diffs, lint and docker output, base64 images) with a secret about every 3 KiB, drawn
from the formats' grammars (`tests/secret_corpus.py`); and keyword-dense clean output (pytest -v
runs with secret-sounding test names, log lines of `token=<stand-in>`, code naming passwords;
`tests/data/redaction/heldout.py`). detect-secrets scans the same text written to a file, as its
CLI would. Goals: ratio >= 350 on the dense bulk (100 MB/s), >= 300 on the secret bulk.

Quality: recall (secrets masked whole) and false-positive rate (clean texts changed at all) on the
labelled corpus; recall on the two held-out corpora (the families of the issue, and other
documented formats), scored separately. The engine is printed: the screen (one Hyperscan pass over
the detectors' supersets and one RE2 `Set` pass over blocks of lines for the field names) with both
wheels, else every line at every keyword (with the Hyperscan prefilter for field names where only
that wheel is there); the rows "without google-re2" and "without the wheels" time those fallbacks
in the same run. With `--rounds 1` (the smoke test) the bulks are 512 KiB.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import Throughput, arguments, interleave, print_throughput_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import secret_corpus
from data.redaction import heldout
from detect_secrets.core.secrets_collection import SecretsCollection
from detect_secrets.settings import default_settings

from oct_mcp.redaction import redact
from oct_mcp.redaction.engine import PASSES, PLAIN_PASSES, Passes
from oct_mcp.redaction.screen import engines_installed

FULL_SIZE = 10 * 1024 * 1024
SMOKE_SIZE = 512 * 1024
SEED = 6
REDACT_REPEATS = 5


def time_redact(text: str, passes: Passes = PASSES) -> float:
    """Seconds per `redact` pass: the median of a few passes, each far shorter than a scan."""
    samples = []
    for _ in range(REDACT_REPEATS):
        started = time.perf_counter()
        redact(text, passes)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def time_detect_secrets(path: Path) -> float:
    """Seconds for detect-secrets to scan `path` with its default plugins and filters."""
    with default_settings():
        started = time.perf_counter()
        SecretsCollection().scan_file(str(path))
        return time.perf_counter() - started


def detect_secrets_line_recall(path: Path, sample: secret_corpus.Sample) -> float:
    """Share of secrets on a line detect-secrets reports (it reports lines; it masks nothing)."""
    with default_settings():
        collection = SecretsCollection()
        collection.scan_file(str(path))
    lines = {secret.line_number for secrets in collection.data.values() for secret in secrets}
    starts = [sample.text.count("\n", 0, start) + 1 for start, _end, _name in sample.secrets]
    return sum(line in lines for line in starts) / len(starts)


def quality() -> tuple[int, float, int, float]:
    """Recall and false-positive rate of `redact` on the labelled corpus."""
    positives, negatives = secret_corpus.corpus(seed=SEED)
    changed = sum(redact(text)[0] != text for text in negatives)
    return len(positives), recall(positives), len(negatives), changed / len(negatives)


def recall(samples: list[secret_corpus.Sample]) -> float:
    found = total = 0
    for sample in samples:
        _text, findings = redact(sample.text)
        covered = secret_corpus.fully_masked(sample.secrets, [(f.start, f.end) for f in findings])
        found += sum(covered)
        total += len(covered)
    return found / total


def bulk_figures(name: str, text: str, rounds: int, goal: float, folder: Path) -> Throughput:
    path = Path(folder) / f"{name}.txt"
    path.write_text(text, encoding="utf-8")
    subject, reference = interleave(rounds, [lambda: time_redact(text), lambda: time_detect_secrets(path)])
    return Throughput(
        f"redaction, {name}: redact vs detect-secrets 1.5", len(text.encode()), subject, reference, goal
    )


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=3)
    size = SMOKE_SIZE if args.rounds == 1 else FULL_SIZE
    sample = secret_corpus.document(random.Random(SEED), size)
    dense = heldout.dense_output(random.Random(SEED), size)
    redact(sample.text)  # warm-up: builds the automata and the prefilter once, as a server's first call does
    with tempfile.TemporaryDirectory() as folder:
        rows = [
            bulk_figures("secret bulk", sample.text, args.rounds, 300, Path(folder)),
            bulk_figures("keyword-dense bulk", dense, args.rounds, 350, Path(folder)),
        ]
        ds_recall = detect_secrets_line_recall(Path(folder) / "secret bulk.txt", sample)
    # The paths of a machine without google-re2 (the Hyperscan prefilter of the field names only),
    # and without either wheel (every line searched, at every keyword).
    fallbacks = (
        ("without google-re2", Passes(screened_from=sys.maxsize)),
        ("without the wheels", PLAIN_PASSES),
    )
    for name, passes in fallbacks:
        for row in rows[:2]:
            text = sample.text if row.claim.startswith("redaction, secret") else dense
            fallback = [time_redact(text, passes) for _ in range(args.rounds)]
            claim = row.claim.replace("redact vs", f"redact {name} vs")
            rows.append(Throughput(claim, row.size, fallback, row.reference, row.goal))
    _redacted, findings = redact(sample.text)
    covered = secret_corpus.fully_masked(sample.secrets, [(f.start, f.end) for f in findings])
    dense_changed = redact(dense)[0] != dense
    secrets, labelled_recall, negatives, fp_rate = quality()
    named = heldout.named_families()
    other = heldout.other_formats()

    field_engine = (
        "the screen (Hyperscan supersets, RE2 Set over line blocks)"
        if engines_installed()
        else "every line (a wheel is missing: hyperscan, google-re2)"
    )
    print(f"detectors run on: {field_engine}")
    print(
        f"input: {len(sample.text.encode()) / 2**20:.1f} MiB of tool output, {len(sample.secrets)} secrets;"
    )
    print(f"       {len(dense.encode()) / 2**20:.1f} MiB of keyword-dense output, changed: {dense_changed}")
    print_throughput_table(rows, args.rounds)
    print()
    print("| quality | secrets | recall | clean texts | false-positive rate |")
    print("|---|---|---|---|---|")
    print(
        f"| labelled corpus (goal: recall >= 0.99, FP <= 0.005) | {secrets} | {labelled_recall:.4f} "
        f"| {negatives} | {fp_rate:.4f} |"
    )
    print(f"| held-out, the issue's families (goal: >= 0.99) | {len(named)} | {recall(named):.4f} | | |")
    print(f"| held-out, other documented formats (goal: >= 0.95) | {len(other)} | {recall(other):.4f} | | |")
    print(f"| benchmark text, redact | {len(covered)} | {sum(covered) / len(covered):.4f} | | |")
    print(f"| benchmark text, detect-secrets (line reported) | {len(covered)} | {ds_recall:.4f} | | |")


if __name__ == "__main__":
    main()
