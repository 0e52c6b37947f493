"""Deadline: the plan's checks, and which of the timer and the first write comes first."""

from __future__ import annotations

import pytest

from oct_mcp.deadline import Deadline
from oct_mcp.errors import ToolTimeoutError


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_deadline_passes_at_its_time_and_check_then_raises_timeout() -> None:
    clock = _Clock()
    deadline = Deadline(5, clock=clock)
    deadline.check()
    clock.now = 105.0

    with pytest.raises(ToolTimeoutError) as caught:
        deadline.check()

    assert caught.value.code == "timeout"


def test_once_expired_no_write_may_begin() -> None:
    deadline = Deadline(5, clock=_Clock())

    assert deadline.expire() is True
    with pytest.raises(ToolTimeoutError):
        deadline.begin_writing()
    assert deadline.expired is True


def test_once_writing_has_begun_the_timer_cannot_expire_the_run() -> None:
    clock = _Clock()
    deadline = Deadline(5, clock=clock)
    deadline.begin_writing()
    clock.now = 200.0

    assert deadline.expire() is False
    deadline.begin_writing()  # the later writes of the same run go on
    assert deadline.expired is False


def test_a_write_past_the_time_is_refused_even_before_the_timer_fires() -> None:
    clock = _Clock()
    deadline = Deadline(5, clock=clock)
    clock.now = 106.0

    with pytest.raises(ToolTimeoutError):
        deadline.begin_writing()
    assert deadline.expire() is True


def test_a_deadline_says_the_time_left_on_its_clock_and_none_once_given_up() -> None:
    clock = _Clock()
    deadline = Deadline(5, clock=clock)
    clock.now = 103.5
    assert deadline.left() == 1.5
    clock.now = 106.0
    assert deadline.left() == 0.0
    clock.now = 101.0
    assert deadline.expire() is True
    assert deadline.left() == 0.0
