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
