"""Shared by the benchmarks: interleaved rounds, medians, and the table each script prints."""

from __future__ import annotations

import argparse
import os
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Comparison:
    """One claim: a subject measured side by side with its reference."""

    claim: str
    subject: list[float]
    reference: list[float]
    goal: float

    @property
    def ratio(self) -> float:
        return statistics.median(self.subject) / statistics.median(self.reference)

    def row(self) -> str:
        verdict = "met" if self.ratio <= self.goal else "MISSED"
        return (
            f"| {self.claim} | {statistics.median(self.subject) * 1e3:.1f} ms "
            f"| {statistics.median(self.reference) * 1e3:.1f} ms "
            f"| {self.ratio:.3f} | <= {self.goal} | {verdict} |"
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


def arguments(description: str, default_rounds: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--rounds", type=int, default=default_rounds, help="interleaved rounds (median taken)"
    )
    return parser.parse_args()


def print_table(comparisons: Sequence[Comparison], rounds: int) -> None:
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
