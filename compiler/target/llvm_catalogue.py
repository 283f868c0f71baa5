"""The CPUs and features LLVM knows, asked of LLVM itself, so that a target naming
one it does not know is refused before LLVM sees it.

LLVM does not fail on an unknown CPU or feature: it prints a warning, ignores it,
and on x86-64 then ends the whole process ("64-bit code requested on a subtarget
that doesn't support it") when it generates code, which no Python code can catch.
llvmlite has no call that lists CPUs; but a target machine made for the CPU
``help`` prints LLVM's lists on stderr (and is never used to generate code), so
they are read from there, once per triple. LLVM prints them only once in a process,
so the first reading is kept, and readings are made one at a time (two threads
reading at once would have the second see nothing, and keep that).

Run ``python -m compiler.target.llvm_catalogue`` to print them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm

_CPU_HEADER = "Available CPUs for this target:"
_FEATURE_HEADER = "Available features for this target:"
_STDERR_LOCK = threading.Lock()
_READ_LOCK = threading.Lock()
_READ: dict[str, Catalogue] = {}


@dataclass(frozen=True)
class Catalogue:
    """What LLVM can generate code for on one triple."""

    cpus: frozenset[str]
    features: frozenset[str]


def catalogue(triple: str) -> Catalogue:
    """The CPUs and features of ``triple``, whose LLVM target must be initialized;
    ``RuntimeError`` where LLVM has no target for it."""
    with _READ_LOCK:
        if triple not in _READ:
            _READ[triple] = _read(triple)
        return _READ[triple]


def _read(triple: str) -> Catalogue:
    llvm_target = llvm.Target.from_triple(triple)
    text = _captured_stderr(
        lambda: llvm_target.create_target_machine(cpu="help", features="", opt=0)
    )
    return Catalogue(_section(text, _CPU_HEADER), _section(text, _FEATURE_HEADER))


def _captured_stderr(action: Callable[[], object]) -> str:
    """What ``action`` writes to file descriptor 2, where LLVM prints."""
    with _STDERR_LOCK, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            action()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode(errors="replace")


def _section(text: str, header: str) -> frozenset[str]:
    """The names listed under ``header``: lines ``  name  - description`` up to the
    first blank line after them."""
    lines = text.splitlines()
    if header not in lines:
        return frozenset()
    names: set[str] = set()
    for line in lines[lines.index(header) + 1 :]:
        if not line.strip():
            if names:
                break
            continue
        names.add(line.split()[0])
    return frozenset(names)


def main() -> None:
    llvm.initialize_native_target()
    triple = llvm.get_process_triple()
    known = catalogue(triple)
    print(f"# CPUs for {triple} (-mcpu=...)")
    print("\n".join(sorted(known.cpus)))
    print(f"# features for {triple} (-mattr=+name,-name)")
    print("\n".join(sorted(known.features)))


if __name__ == "__main__":
    main()
