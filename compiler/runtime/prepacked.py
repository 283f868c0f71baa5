"""Calling a function whose constant weights a build converted ahead
(``compiler.lower.prepack``): the weights go through their pack functions once, and
every later call passes the converted copies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from compiler.lower.prepack import pack_functions
from compiler.runtime.module import Function


def pack_arguments(
    functions: Mapping[str, Function], entry: str, arrays: Sequence[np.ndarray]
) -> list[np.ndarray]:
    """``arrays`` (one per parameter of ``entry``, in the caller's layouts) with every
    weight that ``entry`` takes converted replaced by its converted copy."""
    packed = list(arrays)
    params = [p.name for p in functions[entry].signature.params]
    for param, pack_name in packed_params(functions, entry).items():
        position = params.index(param)
        packed[position] = pack_array(functions[pack_name], arrays[position])
    return packed


def packed_params(functions: Mapping[str, Function], entry: str) -> dict[str, str]:
    """The parameters of ``entry`` that take a converted weight, each with the name of
    the function that converts it. The pack function's second parameter is the
    converted buffer, which ``entry`` takes under the same name."""
    found = {}
    for pack_name in pack_functions(functions, entry).values():
        converted = functions[pack_name].signature.params[1].name
        found[converted] = pack_name
    return found


def pack_array(pack: Function, array: np.ndarray) -> np.ndarray:
    """``array`` converted by ``pack`` into a new array."""
    spec = pack.signature.params[1]
    converted = np.empty(tuple(int(d) for d in spec.shape), dtype=spec.np_dtype)
    pack(np.ascontiguousarray(array), converted)
    return converted
