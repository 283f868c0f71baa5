"""A builder and a measurer that misbehave on purpose, for the workers' fault tests.

The backends run whatever code their ``build_function`` and ``measurer`` names say
(``workers.base.load_hook``); the fault tests name the two below, and put this folder
on PYTHONPATH so the worker processes can import it. Production code has no fault
switch at all: the faults live here.

A candidate asks for a fault with a block annotation ``FAULT_ANNOTATION`` whose value
is a ``Fault`` (and, for ``PAUSE``, a folder: ``"pause:/tmp/dir"``). The faults are
real: a segfault through ctypes, a wait that never ends.
"""

from __future__ import annotations

import ctypes
import enum
import json
import threading
import time
from pathlib import Path

from workers.base import BuildResult, Candidate, MeasureConfig, RunResult
from workers.compile_candidate import build_candidate
from workers.measure import Measurer

FAULT_ANNOTATION = "tests.fault"
BUILD_FUNCTION = "faulty_workers:faulty_build"
MEASURER = "faulty_workers:FaultyMeasurer"
TESTS_FOLDER = str(Path(__file__).parent)
POLL_S = 0.01


class Fault(enum.Enum):
    BUILD_CRASH = "build_crash"  # the builder process segfaults
    BUILD_HANG = "build_hang"  # the builder never returns
    CRASH = "crash"  # the runner segfaults
    HANG = "hang"  # the runner never returns
    PAUSE = "pause"  # the runner says it started, then waits until released


def requested(candidate: Candidate) -> tuple[Fault | None, str]:
    """The fault the candidate's trace asks for, and the annotation's argument (none
    for a trace that does not parse: the real builder reports that)."""
    try:
        instructions = json.loads(candidate.trace)["instructions"]
    except ValueError:
        return None, ""
    for inst in instructions:
        inputs = inst.get("inputs", {})
        if inst["kind"] == "annotate" and inputs.get("ann_key") == FAULT_ANNOTATION:
            name, _, argument = inputs["ann_val"].partition(":")
            return Fault(name), argument
    return None, ""


def segfault() -> None:
    ctypes.string_at(0)


def hang() -> None:
    threading.Event().wait()


def faulty_build(candidate: Candidate) -> BuildResult:
    fault, _ = requested(candidate)
    if fault is Fault.BUILD_CRASH:
        segfault()
    if fault is Fault.BUILD_HANG:
        hang()
    return build_candidate(candidate)


class FaultyMeasurer(Measurer):
    def measure(self, build: BuildResult, config: MeasureConfig) -> RunResult:
        fault, argument = requested(build.candidate)
        if fault is Fault.CRASH:
            segfault()
        if fault is Fault.HANG:
            hang()
        if fault is Fault.PAUSE:
            pause(Path(argument), self.host)
        return super().measure(build, config)


def pause(folder: Path, host: str) -> None:
    """Say this host started (a file named after it), then wait for ``release``."""
    (folder / f"started-{host.replace('/', '_')}").touch()
    wait_for(folder / "release")


def wait_for(path: Path) -> None:
    """Wait until ``path`` exists: the wait ends on that event, however long it takes
    (the poll interval only bounds how soon it is noticed)."""
    while not path.exists():
        time.sleep(POLL_S)
