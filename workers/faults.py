"""A debug hook that makes a candidate misbehave, for the workers' fault tests only.

A test marks a candidate by annotating a block of its schedule with
``FAULT_ANNOTATION`` (value: a ``Fault``) and sets ``FAULT_ENV=1`` in the
environment of the worker processes it starts. A worker reads that variable once,
when its process or actor starts, and passes the answer down; without it the
annotation is an ordinary, inert annotation. So no trace sent through the HTTP
API or the CLI can crash a production worker: the switch is in the worker's
environment, which only whoever starts the worker sets.
"""

from __future__ import annotations

import ctypes
import enum
import json
import os
import time
from collections.abc import Mapping

FAULT_ENV = "TENSORTUNE_TEST_FAULTS"
FAULT_ANNOTATION = "tensortune.test_fault"
SLOW_SECONDS = 1.0


class Fault(enum.Enum):
    BUILD_CRASH = "build_crash"  # the builder process segfaults
    BUILD_HANG = "build_hang"  # the builder never returns
    CRASH = "crash"  # the runner segfaults after loading the library
    HANG = "hang"  # the runner never returns
    RAISE = "raise"  # running the candidate raises
    CORRUPT = "corrupt"  # the candidate's output is changed after it ran
    SLOW = "slow"  # the runner sleeps SLOW_SECONDS first (to catch a batch mid-way)


BUILD_FAULTS = (Fault.BUILD_CRASH, Fault.BUILD_HANG)


def faults_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Read once where a worker process starts; everything below takes the answer."""
    return environ.get(FAULT_ENV) == "1"


def requested_fault(trace_json: str) -> Fault | None:
    """The fault a trace asks for through its annotation, if any."""
    try:
        document = json.loads(trace_json)
    except ValueError:
        return None
    for inst in document.get("instructions", []) if isinstance(document, dict) else []:
        inputs = inst.get("inputs", {}) if isinstance(inst, dict) else {}
        if inst.get("kind") == "annotate" and inputs.get("ann_key") == FAULT_ANNOTATION:
            try:
                return Fault(inputs.get("ann_val"))
            except ValueError:
                return None
    return None


def trigger(fault: Fault) -> None:
    """Misbehave as ``fault`` says (CORRUPT is done by the runner, on the output)."""
    if fault in (Fault.BUILD_CRASH, Fault.CRASH):
        ctypes.string_at(0)
    elif fault in (Fault.BUILD_HANG, Fault.HANG):
        while True:
            time.sleep(1.0)
    elif fault is Fault.RAISE:
        raise RuntimeError("test fault: the candidate raised")
    elif fault is Fault.SLOW:
        time.sleep(SLOW_SECONDS)
