"""Schedules over the loop IR, recorded as replayable traces."""

from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, ExprRV, LoopRV
from compiler.schedule.index_map import IndexMap
from compiler.schedule.schedule import Schedule
from compiler.schedule.trace import Instruction, Trace

__all__ = [
    "BlockRV",
    "ExprRV",
    "IndexMap",
    "Instruction",
    "LoopRV",
    "Schedule",
    "ScheduleError",
    "Trace",
]
