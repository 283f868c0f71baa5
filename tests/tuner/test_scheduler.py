"""Task schedulers on canned task states: exact choices, no timing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tuner import scheduler
from tuner.scheduler import SchedulerError, TaskState, stop_reason


def test_round_robin_gives_the_round_to_the_task_with_fewest_trials() -> None:
    rr = scheduler.create("round-robin")
    states = [TaskState(weight=1, trials=32), TaskState(weight=5, trials=16)]
    assert rr.next_task(states) == 1
    assert rr.next_task([TaskState(1, 16), TaskState(1, 16)]) == 0
    assert rr.next_task([TaskState(1, 16, stopped="space exhausted"), TaskState(1, 48)]) == 1


def test_gradient_warms_up_every_task_before_comparing_them() -> None:
    gradient = scheduler.create("gradient")
    tuned = TaskState(weight=1, trials=16, history=((16, 1e-3),))
    assert gradient.next_task([tuned, TaskState(weight=1, trials=0)]) == 1
    failed_so_far = TaskState(weight=1, trials=16)  # measured, but nothing worked yet
    assert gradient.next_task([tuned, failed_so_far]) == 1


def test_gradient_prefers_the_task_that_weighs_most_in_the_model() -> None:
    gradient = scheduler.create("gradient")
    light = TaskState(weight=1, trials=16, history=((16, 2e-3),))
    heavy = TaskState(weight=8, trials=16, history=((16, 1e-3),))  # 8 ms of the model
    assert gradient.next_task([light, heavy]) == 1


def test_gradient_prefers_a_task_still_improving_over_one_that_stalled() -> None:
    gradient = scheduler.create("gradient", backward_weight=1.0, window=16)
    stalled = TaskState(weight=1, trials=48, history=((16, 1e-3), (32, 1e-3), (48, 1e-3)))
    improving = TaskState(weight=1, trials=48, history=((16, 3e-3), (32, 2e-3), (48, 1e-3)))
    assert gradient.next_task([stalled, improving]) == 1
    assert gradient.gradient(stalled) == 0.0
    assert gradient.gradient(improving) == pytest.approx(-1e-3 / 16)


def test_no_task_is_chosen_when_every_space_is_exhausted() -> None:
    done = [TaskState(1, 8, ((8, 1e-3),), stopped="space exhausted")]
    for kind in scheduler.KINDS:
        assert scheduler.create(kind).next_task(done) is None


def test_an_unknown_kind_or_option_is_refused_naming_the_choices() -> None:
    with pytest.raises(SchedulerError, match="gradient, round-robin"):
        scheduler.create("greedy")
    with pytest.raises(SchedulerError, match="backward_weight"):
        scheduler.create("gradient", backward_weight=2.0)
    with pytest.raises(SchedulerError, match="alternative_reach"):
        scheduler.create("gradient", alternative_reach=0.5)


def test_gradient_tunes_a_slower_algorithm_only_while_it_may_overtake_the_fastest() -> None:
    """Two algorithms of one convolution and another task: the Winograd form far
    behind the direct one gets no rounds, though alone its latency would weigh most;
    once it is close to the direct one, it may."""
    gradient = scheduler.create("gradient")
    direct = TaskState(weight=2, trials=32, history=((32, 1e-3),), choice="conv")
    far_behind = TaskState(weight=2, trials=32, history=((32, 4e-3),), choice="conv")
    other = TaskState(weight=1, trials=32, history=((32, 1e-3),))
    assert gradient.next_task([direct, far_behind, other]) == 0
    assert gradient.gradient(far_behind, {"conv": 1e-3}) == 0.0
    close = TaskState(weight=2, trials=4, history=((4, 1.1e-3),), choice="conv")
    assert gradient.gradient(close, {"conv": 1e-3}) < 0.0


def test_gradient_gives_a_young_algorithm_within_reach_its_first_trials() -> None:
    """A Winograd form 1.5x behind the direct one after one round gets rounds before
    the gradient rule until it has had ``alternative_trials``; one 3x behind, or one
    that has had them, is left to the rule, which gives it none here."""
    gradient = scheduler.create("gradient", alternative_trials=64, alternative_reach=2.0)
    direct, other, young = _direct_other_and_a_form_after_one_round(1.5e-3)
    assert gradient.next_task([direct, other, young]) == 2
    far_behind = replace(young, history=((16, 3e-3),))
    assert gradient.next_task([direct, other, far_behind]) == 1
    grown = replace(young, trials=64, history=((64, 1.5e-3),))
    assert gradient.next_task([direct, other, grown]) == 1
    younger = replace(young, trials=8)
    assert gradient.next_task([direct, young, other, younger]) == 3  # fewest trials first
    without = scheduler.create("gradient", alternative_trials=0)
    assert without.next_task([direct, other, young]) == 1


def test_by_default_a_form_is_young_within_one_and_a_half_times_the_fastest() -> None:
    """The default reach: a form 1.45x behind after one round (a Winograd form that went
    on to win) gets rounds first; one 1.7x behind (a direct form that lost to Winograd)
    is left to the gradient rule, which gives it none here."""
    gradient = scheduler.create("gradient")
    direct, other, close = _direct_other_and_a_form_after_one_round(1.45e-3)
    assert gradient.next_task([direct, other, close]) == 2
    behind = replace(close, history=((16, 1.7e-3),))
    assert gradient.next_task([direct, other, behind]) == 1


def _direct_other_and_a_form_after_one_round(
    seconds: float,
) -> tuple[TaskState, TaskState, TaskState]:
    """A convolution's direct form at 1 ms after 96 trials, another task that the
    gradient rule picks, and the convolution's other form at ``seconds`` after 16."""
    direct = TaskState(weight=2, trials=96, history=((96, 1e-3),), choice="conv")
    other = TaskState(weight=8, trials=16, history=((16, 1e-3),))
    form = TaskState(weight=2, trials=16, history=((16, seconds),), choice="conv")
    return direct, other, form


def test_a_task_whose_best_stopped_falling_is_stopped_with_the_reason() -> None:
    """The best after each round: a task stops once its last ``stall_rounds`` rounds
    took less than MIN_GAIN off it, and keeps going while they took more."""
    steady = ((16, 1.0e-3), (32, 0.995e-3), (48, 0.992e-3))
    assert stop_reason("budget spent", steady, 2) == (
        "its best fell by less than 1% in its last 2 rounds"
    )
    assert stop_reason("budget spent", steady, 3) == ""  # not yet 3 rounds to judge
    assert stop_reason("budget spent", steady, None) == ""
    falling = ((16, 1.0e-3), (32, 0.99e-3), (48, 0.95e-3))
    assert stop_reason("budget spent", falling, 2) == ""
    assert stop_reason("budget spent", falling[:2], 1) == ""  # 1 % exactly is a gain
    assert stop_reason("space exhausted", falling, 2) == "space exhausted"


def test_a_stopped_task_gives_its_rounds_to_the_others() -> None:
    stopped = TaskState(8, 64, ((64, 9e-3),), stopped="its best fell by less than 1%")
    light = TaskState(1, 64, ((64, 1e-3),))
    for kind in scheduler.KINDS:
        assert scheduler.create(kind).next_task([stopped, light]) == 1


def test_once_every_task_stopped_the_stalled_ones_share_what_is_left() -> None:
    """The budget is the user's: with no task taking rounds, a model's next round goes
    to a stalled task (the scheduler's pick among them), never to a spent space."""
    stall = stop_reason("budget spent", ((16, 1.0e-3), (32, 1.0e-3)), 1)
    heavy = TaskState(8, 64, ((64, 9e-3),), stopped=stall)
    light = TaskState(1, 64, ((64, 1e-3),), stopped=stall)
    spent = TaskState(8, 64, ((64, 9e-3),), stopped="space exhausted")
    for kind in scheduler.KINDS:
        pick = scheduler.create(kind)
        assert pick.next_task([spent, light, heavy]) is None
        assert pick.next_round([spent, light, heavy]) in (1, 2)
        assert pick.next_round([spent, replace(light, stopped="early stopping")]) is None
        open_light = replace(light, stopped="")
        assert pick.next_round([heavy, open_light]) == 1  # an open task first
    assert scheduler.create("gradient").next_round([spent, light, heavy]) == 2
