"""Redaction: `redact` against detect-secrets 1.5 (default plugins) on the same tool output, and quality.

Throughput: 10 MiB of realistic tool output (git logs, pytest runs, lockfiles, tracebacks, diffs,
lint and docker output, base64 images) with a secret about every 3 KiB, drawn from the formats'
grammars (`tests/secret_corpus.py`); detect-secrets scans the same text written to a file, as
its CLI would. Goal: ratio >= 300 (the subject's MB/s over detect-secrets').

Quality, on the labelled corpus: recall (secrets masked whole) and false-positive rate (clean
texts changed at all); also on the benchmark text itself. With `--rounds 1` (the smoke test) the
text is 512 KiB, so detect-secrets takes seconds, not minutes.
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
from detect_secrets.core.secrets_collection import SecretsCollection
from detect_secrets.settings import default_settings

from oct_mcp.redaction import redact

FULL_SIZE = 10 * 1024 * 1024
SMOKE_SIZE = 512 * 1024
SEED = 6
REDACT_REPEATS = 5


def time_redact(text: str) -> float:
    """Seconds per `redact` pass: the median of a few passes, each far shorter than a scan."""
    samples = []
    for _ in range(REDACT_REPEATS):
        started = time.perf_counter()
        redact(text)
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
    found = total = 0
    for sample in positives:
        _text, findings = redact(sample.text)
        covered = secret_corpus.fully_masked(sample.secrets, [(f.start, f.end) for f in findings])
        found += sum(covered)
        total += len(covered)
    changed = sum(redact(text)[0] != text for text in negatives)
    return total, found / total, len(negatives), changed / len(negatives)


def main() -> None:
    args = arguments(__doc__ or "", default_rounds=3)
    size = SMOKE_SIZE if args.rounds == 1 else FULL_SIZE
    sample = secret_corpus.document(random.Random(SEED), size)
    text = sample.text
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tool-output.txt"
        path.write_text(text, encoding="utf-8")
        redact(text)  # warm-up: builds the keyword automaton once, as the first call in a server does
        subject, reference = interleave(
            args.rounds, [lambda: time_redact(text), lambda: time_detect_secrets(path)]
        )
        ds_recall = detect_secrets_line_recall(path, sample)
    _redacted, findings = redact(text)
    covered = secret_corpus.fully_masked(sample.secrets, [(f.start, f.end) for f in findings])
    secrets, recall, negatives, fp_rate = quality()

    print(f"input: {len(text.encode()) / 2**20:.1f} MiB of tool output, {len(sample.secrets)} secrets")
    print_throughput_table(
        [Throughput("redaction: redact vs detect-secrets 1.5", len(text.encode()), subject, reference, 300)],
        args.rounds,
    )
    print()
    print("| quality | secrets | recall | clean texts | false-positive rate |")
    print("|---|---|---|---|---|")
    print(
        f"| labelled corpus (goal: recall >= 0.98, FP <= 0.01) | {secrets} | {recall:.4f} "
        f"| {negatives} | {fp_rate:.4f} |"
    )
    print(f"| benchmark text, redact | {len(covered)} | {sum(covered) / len(covered):.4f} | | |")
    print(f"| benchmark text, detect-secrets (line reported) | {len(covered)} | {ds_recall:.4f} | | |")


if __name__ == "__main__":
    main()
