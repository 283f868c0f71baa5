"""Everything ``db`` takes from the compiler, in one place.

The database stores workloads and traces as data: a workload is canonical PrimFunc
JSON named by its key (a hash of that JSON), a schedule is trace JSON named by its
trace hash, a target is its canonical string, a failure is an ``ErrorKind``. This
module is the one border: it names those few things and the checks the database
makes with them (a spec becomes a workload, a trace must replay on its workload, a
target string must parse), so no other module of ``db`` imports the compiler.
"""

from __future__ import annotations

from compiler.errors import ErrorKind
from compiler.ir.function import PrimFunc
from compiler.schedule.errors import ScheduleError
from compiler.schedule.trace import TRACE_FORMAT_VERSION, Trace, canonical_trace, trace_hash
from compiler.target.errors import TargetError
from compiler.target.parse import canonical_target, target_host_kind
from compiler.tuned.replay import replayed
from compiler.workload.key import workload_from_json, workload_key, workload_to_json
from compiler.workload.spec import WorkloadError, normalize_spec, workload_from_spec

__all__ = [
    "TRACE_FORMAT_VERSION",
    "ErrorKind",
    "PrimFunc",
    "ScheduleError",
    "TargetError",
    "Trace",
    "WorkloadError",
    "canonical_target",
    "canonical_trace",
    "normalize_spec",
    "replayed",
    "target_host_kind",
    "trace_hash",
    "workload_from_json",
    "workload_from_spec",
    "workload_key",
    "workload_to_json",
]
