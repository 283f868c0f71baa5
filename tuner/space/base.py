"""The space extension point: a finite set of configs, each one schedule of a workload.

A config is a point of the space: one choice index per knob (``choices``) and the
single integer that numbers it (``index``, the first knob varying fastest). A
space turns a config into a Schedule of its workload, whose trace is what the
database stores, and reads a stored trace back into the config it came from, so
a resumed search knows what was measured.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, Trace


class SpaceError(ValueError):
    """A space or template defined wrongly (a bad knob, an unknown template), as
    opposed to a config that cannot be applied, which is a ScheduleError."""


@dataclass(frozen=True)
class Config:
    """One point of a space: ``choices[k]`` indexes the entities of knob ``k``."""

    index: int
    choices: tuple[int, ...]


class Space(abc.ABC):
    """A finite space of schedules of one workload (``func``).

    Implementations say how many choices each knob has (``dims``), how a config
    becomes a schedule, and how a trace maps back to a config; numbering configs
    is shared.
    """

    func: PrimFunc

    @property
    @abc.abstractmethod
    def dims(self) -> tuple[int, ...]:
        """How many entities each knob has, in definition order."""

    @abc.abstractmethod
    def schedule(self, config: Config) -> Schedule:
        """The workload scheduled by ``config``; raises ScheduleError when the
        config is illegal on this workload."""

    @abc.abstractmethod
    def config_from_trace(self, trace: Trace) -> Config | None:
        """The config whose schedule recorded ``trace``, or None for a trace this
        space did not make."""

    @abc.abstractmethod
    def describe(self, config: Config) -> dict[str, Any]:
        """The config's entities by knob name, for people and logs."""

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def config(self, index: int) -> Config:
        """The config numbered ``index`` (0 <= index < size)."""
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self.size:
            raise IndexError(f"config index {index!r} is outside the space of {self.size}")
        choices = []
        rest = index
        for dim in self.dims:
            rest, choice = divmod(rest, dim)
            choices.append(choice)
        return Config(index, tuple(choices))

    def config_of(self, choices: Sequence[int]) -> Config:
        """The config with these knob choices."""
        dims = self.dims
        fits = len(choices) == len(dims) and all(
            0 <= c < d for c, d in zip(choices, dims, strict=True)
        )
        if not fits:
            raise IndexError(f"choices {list(choices)} do not fit the knob sizes {list(dims)}")
        index = 0
        for choice, dim in zip(reversed(choices), reversed(dims), strict=True):
            index = index * dim + int(choice)
        return Config(index, tuple(int(c) for c in choices))

    def trace(self, config: Config) -> Trace:
        """The trace of ``config``'s schedule; raises ScheduleError when illegal."""
        return self.schedule(config).trace
