"""The builds a backend keeps: a candidate measured again soon (a search's
confirmation, a model's finalist) is not built again, and the kept libraries stay
within their byte budget."""

from __future__ import annotations

from worker_candidates import MATMUL, illegal_candidate

import workers
from compiler import Schedule
from compiler.workload.spec import workload_from_spec
from workers import BuildResult, Candidate
from workers.base import Artifact
from workers.build_cache import BuildCache


def matmul_candidate(factor: int) -> Candidate:
    """A matmul whose outer loop is split by ``factor + 1``: one trace per factor."""
    func = workload_from_spec(MATMUL)
    sch = Schedule(func)
    outer = sch.get_loops(sch.get_block("T_matmul"))[0]
    sch.split(outer, [None, factor + 1])
    return Candidate.make(func, sch.trace, spec=MATMUL)


def library_build(factor: int, size: int) -> BuildResult:
    return BuildResult(matmul_candidate(factor), Artifact(bytes(size), "f", "{}"), seconds=0.5)


def test_the_least_recently_used_builds_go_once_their_libraries_pass_the_budget() -> None:
    cache = BuildCache(max_bytes=100)
    for seed in range(3):
        cache.put(library_build(seed, 40))
    assert len(cache) == 2
    assert cache.get(matmul_candidate(0)) is None
    assert cache.get(matmul_candidate(1)) is not None  # now the most recently used
    cache.put(library_build(3, 40))
    assert cache.get(matmul_candidate(2)) is None
    assert cache.get(matmul_candidate(1)) is not None
    cache.put(library_build(1, 40))  # again: counted once
    assert len(cache) == 2


def test_a_kept_build_is_handed_out_as_the_asking_candidates_and_takes_no_time() -> None:
    cache = BuildCache()
    cache.put(library_build(4, 10))
    again = matmul_candidate(4)
    kept = cache.get(again)
    assert kept is not None
    assert kept.candidate is again and kept.seconds == 0.0 and kept.artifact is not None
    assert kept.artifact.library == bytes(10)


def test_a_failed_build_is_not_kept() -> None:
    cache = BuildCache()
    cache.put(BuildResult.failed(illegal_candidate(), workers.ErrorKind.BUILD_ERROR, "no"))
    assert len(cache) == 0


def test_workers_build_a_candidate_once_and_hand_out_the_kept_build_after() -> None:
    with workers.create("local", max_workers=1) as backend:
        (first,) = backend.build([matmul_candidate(7)])
        second, other = backend.build([matmul_candidate(7), matmul_candidate(8)])
        (runs,) = backend.measure([matmul_candidate(7)])
    assert first.ok and first.seconds > 0
    assert second.seconds == 0.0 and second.artifact == first.artifact
    assert other.ok and other.seconds > 0
    assert runs.ok
    assert len(backend.kept_builds) == 2
