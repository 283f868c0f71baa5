"""Confirmation: a search steered by its measurements measures its fastest trials a
second time, and the contenders it expected fast that measured slow, before they steer
it; a trial keeps its faster time, so one measurement slowed by another process does
not decide where the search goes."""

from __future__ import annotations

import pytest
from replay_measurements import Replay, small_space, synthetic_seconds

from tuner import search
from tuner.search import MeasureResult, SearchError, SearchStrategy
from tuner.search.base import CONFIRM_TOP
from tuner.space import Space, TraceCandidate

# Decision features: the model scores a point in microseconds.
FAST = {"features": "decision"}


@pytest.fixture(scope="module")
def space() -> Space:
    return small_space()


def _replay(space: Space) -> Replay:
    return Replay(space, lambda candidate: synthetic_seconds(space, candidate))


def _measured_batch(strategy: SearchStrategy, replay: Replay) -> list[TraceCandidate]:
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    strategy.notify_runner_results(batch, replay.measure(batch))
    return batch


def _seconds_of(strategy: SearchStrategy, candidate: TraceCandidate) -> float | None:
    (seconds,) = [
        o.seconds
        for o in strategy.history
        if o.candidate is not None and o.candidate.trace_hash == candidate.trace_hash
    ]
    return seconds


def test_the_fastest_trials_are_confirmed_once_and_keep_their_faster_time(space) -> None:
    replay = _replay(space)
    strategy = search.create("evolutionary", space=space, max_trials=64, batch_size=8, **FAST)
    _measured_batch(strategy, replay)
    fastest = [o.candidate for o in strategy.measured()[:CONFIRM_TOP]]
    again = strategy.confirmation_candidates()
    assert again == fastest
    first, second = again
    first_seconds, second_seconds = _seconds_of(strategy, first), _seconds_of(strategy, second)
    assert first_seconds is not None and second_seconds is not None
    # The second measurement of the fastest is slower (kept: its first stands); the
    # runner-up's is faster than anything yet, so it becomes the best.
    strategy.notify_confirmations(
        again, [MeasureResult(2 * first_seconds), MeasureResult(0.5 * first_seconds)]
    )
    assert _seconds_of(strategy, first) == first_seconds
    assert _seconds_of(strategy, second) == 0.5 * first_seconds
    assert strategy.best is not None and strategy.best.candidate == second
    assert strategy.trials == 8  # a confirmation is no trial
    assert not set(strategy.confirmation_candidates()) & {first, second}
    with pytest.raises(SearchError, match="already confirmed"):
        strategy.notify_confirmations([first], [MeasureResult(first_seconds)])
    with pytest.raises(SearchError, match="1 results for 2 candidates"):
        strategy.notify_confirmations(again, [MeasureResult(first_seconds)])


def test_a_contender_slowed_once_is_measured_again_and_keeps_its_place(space) -> None:
    """The model's favourite of a batch measures five times slower than it is (another
    process took the core): the search asks to measure it again, and the second, true
    time is what steers it. Before, the slow time stayed, and the model learned that
    the favourite's region was poor."""
    replay = _replay(space)
    strategy = search.create(
        "evolutionary", space=space, max_trials=64, batch_size=8, seed=1, epsilon=0.0, **FAST
    )
    for _ in range(2):
        _measured_batch(strategy, replay)
        strategy.notify_confirmations(
            again := strategy.confirmation_candidates(), replay.measure(again)
        )
    batch = strategy.generate_measure_candidates()
    assert batch is not None
    favourite = batch[0]
    results = replay.measure(batch)
    true_seconds = results[0].seconds
    assert true_seconds is not None
    results[0] = MeasureResult(5 * true_seconds)
    strategy.notify_runner_results(batch, results)
    again = strategy.confirmation_candidates()
    assert favourite in again
    strategy.notify_confirmations(again, replay.measure(again))
    assert _seconds_of(strategy, favourite) == true_seconds


def test_restored_records_of_one_trace_confirm_it_with_their_fastest_time(space) -> None:
    replay = _replay(space)
    first = search.create("evolutionary", space=space, max_trials=8, batch_size=8, **FAST)
    batch = _measured_batch(first, replay)
    best = first.measured()[0]
    assert best.candidate is not None and best.seconds is not None
    records = [(c.trace_json, _seconds_of(first, c)) for c in batch]
    records.append((best.candidate.trace_json, 0.5 * best.seconds))
    resumed = search.create("evolutionary", space=space, max_trials=16, batch_size=8, **FAST)
    assert resumed.restore_traces(records) == 8
    assert resumed.best is not None and resumed.best.seconds == 0.5 * best.seconds
    assert best.candidate not in resumed.confirmation_candidates()


@pytest.mark.parametrize("kind", ["random", "grid"])
def test_a_search_its_measurements_do_not_steer_confirms_nothing(space, kind: str) -> None:
    strategy = search.create(kind, space=space, max_trials=16, batch_size=8)
    _measured_batch(strategy, _replay(space))
    assert strategy.confirmation_candidates() == []


def test_confirm_top_is_checked(space) -> None:
    with pytest.raises(SearchError, match="confirm_top must be None or an int >= 0, got -1"):
        search.create("random", space=space, max_trials=8, confirm_top=-1)
    strategy = search.create("xgb", space=space, max_trials=8, confirm_top=0)
    _measured_batch(strategy, _replay(space))
    assert strategy.confirmation_candidates() == []


def test_a_resumed_search_never_asks_to_confirm_a_trace_stored_twice(space) -> None:
    """A model's next round: a search resumes from a few stored records, one trace stored
    twice (confirmed in an earlier round) and far slower than its region, and learns
    from another task's records. Its model expects that trace among the fastest, but it
    was confirmed already: the search must not ask for it again (it did, and the round
    failed with a SearchError)."""
    replay = _replay(space)
    best = replay.exhaustive_best()
    seconds = synthetic_seconds(space, best)
    assert seconds is not None
    other = small_space(m=32, n=24, k=8)
    other_replay = _replay(other)
    teacher = search.create("random", space=other, max_trials=48, batch_size=16)
    for _ in range(3):
        _measured_batch(teacher, other_replay)
    records = [(o.candidate.trace_json, o.seconds) for o in teacher.history if o.candidate]
    resumed = search.create("evolutionary", space=space, max_trials=32, batch_size=8, **FAST)
    slow = 20 * seconds
    assert resumed.restore_traces([(best.trace_json, slow), (best.trace_json, slow)]) == 1
    assert resumed.learn_from(other, records) > 0
    _measured_batch(resumed, replay)
    again = resumed.confirmation_candidates()
    assert best not in again
    resumed.notify_confirmations(again, replay.measure(again))
