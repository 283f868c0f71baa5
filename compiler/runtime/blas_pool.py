"""One thread pool for tensortune's kernels and numpy's BLAS.

A parallel kernel runs on OpenMP's thread pool (libgomp). numpy's OpenBLAS keeps a
pool of its own, whose idle threads spin for about 0.1 s after every BLAS call
(OpenBLAS's thread timeout) and libgomp's idle threads spin too. In a process that
calls both, the two pools fight for the same cores: measured on 2 cores, a GEMM
1024^3 kernel called right after ``numpy.matmul`` ran at 0.35-0.45 of its speed
alone (the spinning BLAS thread took a fair third of the CPU, and the kernel's
statically split loop waited for its slowest thread), and numpy after the kernel
at 0.6 of its own. Splitting the kernel's work dynamically only reached 0.65:
no split wins back a core that another thread keeps busy.

OpenBLAS (0.3.27 and later) lets a program run BLAS's parallel jobs on a thread
pool of its choosing (``openblas_set_threads_callback_function``). The runtime
hands it a small callback, compiled once with LLVM, that runs BLAS's jobs as one
OpenMP parallel region of exactly as many threads as BLAS asked for. BLAS then
runs on the same threads as the kernels: nothing else spins, each side keeps its
speed next to the other (interleaved/alone about 1.0 for both), and numpy's
settings are untouched: BLAS still picks its own thread count and computes the
same results. ``share_pool_with_blas(False)`` gives BLAS its own threads back.

Nothing is done where no OpenBLAS with that entry point is loaded (an older
OpenBLAS, MKL), or where OpenMP may shrink a team (``OMP_DYNAMIC=true`` or an
``OMP_THREAD_LIMIT``): BLAS's jobs wait for each other, so they must all run at once.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm

from compiler.errors import CompilerError
from compiler.target.llvm import init_llvm

# The setter's name in the OpenBLAS builds numpy and SciPy ship, and in a plain build.
_SETTER_NAMES = (
    "scipy_openblas_set_threads_callback_function64_",
    "scipy_openblas_set_threads_callback_function",
    "openblas_set_threads_callback_function64_",
    "openblas_set_threads_callback_function",
)

# void callback(int sync, dojob_fn dojob, int numjobs, size_t job_size, void *jobs,
#               int dojob_data), with dojob(int thread, void *job, int dojob_data):
# job k runs on OpenMP thread k of a team of numjobs threads. ``calls`` counts the
# BLAS calls the pool ran, so a program (and the tests) can see that it is in use.
_CALLBACK_IR = r"""
%jobs_t = type { ptr, ptr, i64, i32 }
@calls = global i64 0
declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()

define internal void @run_job(ptr %ctx) {
  %thread = call i32 @omp_get_thread_num()
  %dojob_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 0
  %dojob = load ptr, ptr %dojob_slot
  %jobs_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 1
  %jobs = load ptr, ptr %jobs_slot
  %size_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 2
  %size = load i64, ptr %size_slot
  %data_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 3
  %data = load i32, ptr %data_slot
  %thread64 = sext i32 %thread to i64
  %offset = mul i64 %thread64, %size
  %job = getelementptr i8, ptr %jobs, i64 %offset
  call void %dojob(i32 %thread, ptr %job, i32 %data)
  ret void
}

define void @run_blas_jobs(i32 %sync, ptr %dojob, i32 %numjobs, i64 %size, ptr %jobs,
                           i32 %data) {
  %ctx = alloca %jobs_t
  %dojob_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 0
  store ptr %dojob, ptr %dojob_slot
  %jobs_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 1
  store ptr %jobs, ptr %jobs_slot
  %size_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 2
  store i64 %size, ptr %size_slot
  %data_slot = getelementptr %jobs_t, ptr %ctx, i32 0, i32 3
  store i32 %data, ptr %data_slot
  %ignored = atomicrmw add ptr @calls, i64 1 monotonic
  call void @GOMP_parallel(ptr @run_job, ptr %ctx, i32 %numjobs, i32 0)
  ret void
}
"""

BlasSetter = Callable[[ctypes.c_void_p], None]


@dataclass
class _PoolState:
    """What this process has done so far; guarded by ``_lock``."""

    wanted: bool | None = None  # the program's choice; None until the first kernel
    setters: list[BlasSetter] | None = None
    engine: llvm.ExecutionEngine | None = None
    callback_address: int = 0
    fork_handler: bool = False
    forked_after_pool_started: bool = False


_lock = threading.Lock()
_state = _PoolState()


class ThreadPoolError(CompilerError, RuntimeError):
    """A kernel cannot run on this process's OpenMP thread pool."""


def share_pool_with_blas(enabled: bool = True) -> bool:
    """Run numpy's BLAS on the kernels' OpenMP pool (``enabled``, the default the runtime
    applies before it makes its first kernel), or on BLAS's own threads again; the
    choice holds for the rest of the process. Returns whether BLAS shares the pool."""
    with _lock:
        _state.wanted = enabled
        return _apply(enabled)


def prepare_pool() -> None:
    """What the runtime calls before it hands out kernels: share the pool unless the
    program said otherwise. Cheap after the first call."""
    with _lock:
        if _state.wanted is None:
            _state.wanted = True
            _apply(True)


def _apply(enabled: bool) -> bool:
    setters = _blas_setters()
    if not setters or (enabled and not _openmp_keeps_team_sizes()):
        return False
    address = _callback_address() if enabled else 0
    for setter in setters:
        setter(ctypes.c_void_p(address))
    if enabled and not _state.fork_handler:
        os.register_at_fork(after_in_child=_unshare_in_child)
        _state.fork_handler = True
    return enabled


def _unshare_in_child() -> None:
    """A forked child has none of the parent's OpenMP threads: libgomp's pool does not
    survive a fork, and a parallel region in the child waits for them forever. OpenBLAS
    restarts its own pool after a fork, so the child's BLAS goes back to it; the
    child's kernels refuse to run if the parent's pool had started (see
    ``check_not_forked``)."""
    _state.forked_after_pool_started = shared_blas_calls() > 0
    for setter in _state.setters or ():
        setter(ctypes.c_void_p(0))
    _state.wanted = False


def check_not_forked() -> None:
    """Raise ThreadPoolError in a process forked after BLAS ran on the shared pool,
    where a parallel kernel would hang instead of running."""
    if _state.forked_after_pool_started:
        raise ThreadPoolError(
            "this process was forked after its parent ran BLAS on the OpenMP thread pool, "
            "and OpenMP's threads do not survive a fork: start worker processes with "
            "multiprocessing's 'spawn' or 'forkserver' method, or call "
            "compiler.runtime.share_pool_with_blas(False) before the first build"
        )


def shared_blas_calls() -> int:
    """How many parallel BLAS calls have run on the shared pool in this process."""
    with _lock:
        if _state.engine is None:
            return 0
        counter = _state.engine.get_global_value_address("calls")
    return ctypes.c_int64.from_address(counter).value


def _callback_address() -> int:
    """The compiled callback, made once per process (its engine must stay alive)."""
    if _state.engine is None:
        init_llvm()
        module = llvm.parse_assembly(_CALLBACK_IR)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine()
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        _state.engine = engine
        _state.callback_address = engine.get_function_address("run_blas_jobs")
    return _state.callback_address


def _blas_setters() -> list[BlasSetter]:
    """The callback setters of every OpenBLAS loaded in this process."""
    if _state.setters is None:
        setters = []
        for path in _loaded_libraries("openblas"):
            library = ctypes.CDLL(path)
            for name in _SETTER_NAMES:
                setter = getattr(library, name, None)
                if setter is not None:
                    setter.argtypes = [ctypes.c_void_p]
                    setter.restype = None
                    setters.append(setter)
                    break
        _state.setters = setters
    return _state.setters


def _loaded_libraries(fragment: str) -> list[str]:
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if fragment in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in os.path.basename(p))


def _openmp_keeps_team_sizes() -> bool:
    """Whether libgomp gives a parallel region every thread it asks for (no dynamic
    team sizes, no thread limit), as the loaded OpenMP runtime itself reports."""
    init_llvm()
    openmp = ctypes.CDLL(None)
    return openmp.omp_get_dynamic() == 0 and openmp.omp_get_thread_limit() >= 2**30
