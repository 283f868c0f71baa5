"""CPU targets: the ``"llvm -mcpu=... -num-cores=..."`` strings, and the LLVM state
(initialization, OpenMP runtime, target machines) that every build shares.

LLVM is initialized once per process and target machines are cached per
(triple, cpu, features): a tuner builds thousands of kernels and none of this
changes between them.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import llvmlite.binding as llvm

from compiler.errors import CompilerError

TARGET_FORMS = (
    '"llvm" (the host CPU)',
    '"llvm -mcpu=<cpu>"',
    '"llvm -mattr=+avx2,+fma"',
    '"llvm -num-cores=<n>"',
    '"llvm -mtriple=<triple>"',
)


class TargetError(CompilerError, ValueError):
    """A target string that cannot be parsed."""


@dataclass(frozen=True)
class LLVMTarget:
    """A CPU to generate code for. ``num_cores`` is the thread count of parallel loops;
    0 lets the OpenMP runtime decide (OMP_NUM_THREADS or every core)."""

    cpu: str
    features: str
    num_cores: int = 0
    triple: str = ""

    @staticmethod
    def parse(target: str | LLVMTarget) -> LLVMTarget:
        if isinstance(target, LLVMTarget):
            return target
        tokens = str(target).split()
        if not tokens or tokens[0] != "llvm":
            raise TargetError(
                f"unknown target {target!r}; the allowed forms are {', '.join(TARGET_FORMS)}"
            )
        options = _parse_options(target, tokens[1:])
        cpu = options.get("mcpu")
        features = options.get("mattr")
        if cpu is None:
            cpu = llvm.get_host_cpu_name()
            features = _host_features() if features is None else features
        num_cores = _parse_num_cores(target, options.get("num-cores", "0"))
        return LLVMTarget(cpu, features or "", num_cores, options.get("mtriple", ""))

    @property
    def threads(self) -> int:
        """How many threads a parallel loop runs on, which the tuner sizes parallel
        loops by."""
        return self.num_cores or os.cpu_count() or 1

    @property
    def vector_bits(self) -> int:
        """The widest vector registers this CPU has, which the tuner sizes vector loops by."""
        features = self.features if self.features else _cpu_features(self.cpu)
        if "+avx512f" in features:
            return 512
        if "+avx" in features:
            return 256
        return 128

    def __str__(self) -> str:
        parts = ["llvm", f"-mcpu={self.cpu}"]
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        if self.triple:
            parts.append(f"-mtriple={self.triple}")
        return " ".join(parts)


def _parse_options(target: str, tokens: list[str]) -> dict[str, str]:
    allowed = ("mcpu", "mattr", "num-cores", "mtriple")
    options: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.lstrip("-").partition("=")
        if not token.startswith("-") or not sep or key not in allowed or not value:
            raise TargetError(
                f"target {target!r}: cannot read option {token!r}; the options are "
                f"{', '.join('-' + a + '=...' for a in allowed)}"
            )
        options[key] = value
    return options


def _parse_num_cores(target: str, text: str) -> int:
    if not text.isdigit():
        raise TargetError(f"target {target!r}: -num-cores must be a non-negative integer")
    return int(text)


@functools.cache
def _host_features() -> str:
    return llvm.get_host_cpu_features().flatten()


_AVX512_CPUS = (
    "skylake-avx512",
    "cascadelake",
    "cooperlake",
    "icelake",
    "tigerlake",
    "sapphirerapids",
    "graniterapids",
    "znver4",
    "znver5",
)
_AVX2_CPUS = (
    "haswell",
    "broadwell",
    "skylake",
    "alderlake",
    "raptorlake",
    "znver1",
    "znver2",
    "znver3",
)


def _cpu_features(cpu: str) -> str:
    """Features of a named CPU, for capability queries only (LLVM knows the full list)."""
    if cpu == llvm.get_host_cpu_name():
        return _host_features()
    if cpu.startswith(_AVX512_CPUS):
        return "+avx,+avx2,+avx512f"
    if cpu.startswith(_AVX2_CPUS):
        return "+avx,+avx2"
    return ""


@functools.cache
def init_llvm() -> None:
    """Initialize LLVM's native target and load the OpenMP runtime, once per process."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    llvm.load_library_permanently(_libgomp_path())


def _libgomp_path() -> str:
    """The libgomp already in this process (e.g. scikit-learn's copy) or the system's:
    two copies in one process would each start their own thread pool."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libgomp" in os.path.basename(path) and path.startswith("/"):
                    return path
    except OSError:
        pass
    return "libgomp.so.1"


@functools.cache
def target_machine(target: LLVMTarget) -> llvm.TargetMachine:
    """The target machine for ``target``, shared by every build for that target."""
    init_llvm()
    triple = target.triple or llvm.get_process_triple()
    try:
        llvm_target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise TargetError(f"target {target}: LLVM cannot generate code for {triple!r}") from err
    return llvm_target.create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="pic", codemodel="default"
    )
