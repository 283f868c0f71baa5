"""Workloads and traces that the database tests store: small, odd-sized operators and
schedules written by hand, so every stored trace really replays."""

from __future__ import annotations

from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from compiler.schedule.trace import Trace
from compiler.workload.spec import workload_from_spec

MATMUL = {"op": "matmul", "args": {"m": 33, "n": 17, "k": 9}}
RELU = {"op": "relu", "args": {"shape": [7, 5]}}
BLOCKS = {"matmul": "T_matmul", "relu": "T_relu"}
SKYLAKE = "llvm -mcpu=skylake -num-cores=2"
ZEN = "llvm -mcpu=znver3 -num-cores=2"


def matmul() -> PrimFunc:
    return workload_from_spec(MATMUL)


def split_trace(factor: int, spec: dict = MATMUL) -> Trace:
    """The schedule that splits the first loop of the spec's block by ``factor``."""
    sch = Schedule(workload_from_spec(spec))
    first = sch.get_loops(sch.get_block(BLOCKS[spec["op"]]))[0]
    sch.split(first, [None, factor])
    return sch.trace
