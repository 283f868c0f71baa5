"""The service's memos: a value computed once per key (kept forever, or for a moment),
never a failure kept, and an expired value recomputed by one caller while the others
get the old one."""

from __future__ import annotations

import time

import pytest

from tuner.service.memo import Memo, RecentMemo


def test_a_memo_computes_each_key_once_and_keeps_no_failure() -> None:
    memo: Memo[str, int] = Memo(size=2)
    calls: list[str] = []

    def compute(key: str) -> int:
        calls.append(key)
        if key == "bad":
            raise LookupError(key)
        return len(key)

    assert [memo.get(k, lambda k=k: compute(k)) for k in ("ab", "ab", "abc")] == [2, 2, 3]
    assert calls == ["ab", "abc"]
    for _ in range(2):
        with pytest.raises(LookupError):
            memo.get("bad", lambda: compute("bad"))
    assert calls.count("bad") == 2
    memo.get("abcd", lambda: compute("abcd"))  # full: everything before is dropped
    memo.get("ab", lambda: compute("ab"))
    assert calls.count("ab") == 2


def test_a_recent_memo_recomputes_after_its_seconds() -> None:
    memo: RecentMemo[str, int] = RecentMemo(seconds=0.05)
    values = iter(range(10))
    first = memo.get("k", lambda: next(values))
    assert memo.get("k", lambda: next(values)) == first
    time.sleep(0.06)
    assert memo.get("k", lambda: next(values)) == first + 1


def test_while_one_caller_recomputes_the_others_get_the_old_value() -> None:
    memo: RecentMemo[str, str] = RecentMemo(seconds=0.05)
    memo.get("k", lambda: "old")
    time.sleep(0.06)
    seen_meanwhile: list[str] = []

    def slow_recompute() -> str:
        seen_meanwhile.append(memo.get("k", lambda: "computed twice"))
        return "new"

    assert memo.get("k", slow_recompute) == "new"
    assert seen_meanwhile == ["old"] and memo.get("k", lambda: "x") == "new"


def test_a_recent_memo_keeps_only_what_keep_allows() -> None:
    memo: RecentMemo[str, int | None] = RecentMemo(seconds=60)
    answers = iter([None, 7, 8])
    assert memo.get("k", lambda: next(answers), keep=lambda v: v is not None) is None
    assert memo.get("k", lambda: next(answers), keep=lambda v: v is not None) == 7
    assert memo.get("k", lambda: next(answers), keep=lambda v: v is not None) == 7
