"""Shared by the benchmarks: interleaved rounds, medians, and the table each script prints."""

from __future__ import annotations

import argparse
import os
import random
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

_SCALES: Final = {"ms": 1e3, "us": 1e6}


@dataclass(frozen=True)
class Comparison:
    """One claim: a subject measured side by side with its reference."""

    claim: str
    subject: list[float]
    reference: list[float]
    goal: float
    unit: str = "ms"
    """How the medians are shown: `ms` or `us` (the samples are seconds either way)."""

    @property
    def ratio(self) -> float:
        return statistics.median(self.subject) / statistics.median(self.reference)

    def row(self) -> str:
        verdict = "met" if self.ratio <= self.goal else "MISSED"
        scale = _SCALES[self.unit]
        return (
            f"| {self.claim} | {statistics.median(self.subject) * scale:.1f} {self.unit} "
            f"| {statistics.median(self.reference) * scale:.1f} {self.unit} "
            f"| {self.ratio:.3f} | <= {self.goal} | {verdict} |"
        )


@dataclass(frozen=True)
class PerCall:
    """One claim about absolute time per call (the goal in microseconds), its reference beside it.

    `subject` and `reference` are seconds per call. The ratio is shown for scale; the verdict is
    on the subject's median against `goal_us`.
    """

    claim: str
    subject: list[float]
    reference: list[float]
    goal_us: float

    @property
    def subject_us(self) -> float:
        return statistics.median(self.subject) * 1e6

    @property
    def reference_us(self) -> float:
        return statistics.median(self.reference) * 1e6

    @property
    def ratio(self) -> float:
        return self.subject_us / self.reference_us

    def row(self) -> str:
        verdict = "met" if self.subject_us <= self.goal_us else "MISSED"
        return (
            f"| {self.claim} | {self.subject_us:.1f} us | {self.reference_us:.1f} us "
            f"| {self.ratio:.1f} | <= {self.goal_us:g} us (subject) | {verdict} |"
        )


def interleave(rounds: int, measures: Sequence[Callable[[], float]]) -> list[list[float]]:
    """Run each measure once per round, in a shuffled order each round, so drift hits all alike."""
    samples: list[list[float]] = [[] for _ in measures]
    order = list(range(len(measures)))
    for _ in range(rounds):
        random.shuffle(order)
        for index in order:
            samples[index].append(measures[index]())
    return samples


async def interleave_async(
    rounds: int, measures: Sequence[Callable[[], Awaitable[float]]]
) -> list[list[float]]:
    """`interleave` for measures that run inside one event loop."""
    samples: list[list[float]] = [[] for _ in measures]
    order = list(range(len(measures)))
    for _ in range(rounds):
        random.shuffle(order)
        for index in order:
            samples[index].append(await measures[index]())
    return samples


def arguments(description: str, default_rounds: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--rounds", type=int, default=default_rounds, help="interleaved rounds (median taken)"
    )
    return parser.parse_args()


def print_table(comparisons: Sequence[Comparison | PerCall], rounds: int) -> None:
    print(f"rounds: {rounds}, cores: {os.cpu_count()}")
    print("| claim | subject (median) | reference (median) | ratio | goal | |")
    print("|---|---|---|---|---|---|")
    for comparison in comparisons:
        print(comparison.row())


@dataclass(frozen=True)
class Throughput:
    """One claim about speed: the subject's rate over the reference's on the same input (higher wins).

    `subject` and `reference` are seconds per pass over `size` bytes.
    """

    claim: str
    size: int
    subject: list[float]
    reference: list[float]
    goal: float

    @property
    def subject_rate(self) -> float:
        return self.size / statistics.median(self.subject) / 1e6

    @property
    def reference_rate(self) -> float:
        return self.size / statistics.median(self.reference) / 1e6

    @property
    def ratio(self) -> float:
        return self.subject_rate / self.reference_rate

    def row(self) -> str:
        verdict = "met" if self.ratio >= self.goal else "MISSED"
        return (
            f"| {self.claim} | {self.subject_rate:.1f} MB/s | {self.reference_rate:.3f} MB/s "
            f"| {self.ratio:.0f} | >= {self.goal:g} | {verdict} |"
        )


def print_throughput_table(rows: Sequence[Throughput], rounds: int) -> None:
    print(f"rounds: {rounds}, cores: {os.cpu_count()}")
    print("| claim | subject (median) | reference (median) | ratio | goal | |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(row.row())
