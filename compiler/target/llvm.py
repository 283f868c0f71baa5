"""CPU targets: the ``"llvm -mcpu=... -mattr=... -num-cores=..."`` strings, what a
target can do (``Capabilities``), and the LLVM state (initialization, OpenMP runtime,
target machines) that every build shares.

A target's canonical string names its CPU and, always, the features that change the
code generated for it (vector extensions, FMA, bit manipulation), sorted, so one
machine always spells its target the same way and a schedule tuned where AVX-512 was
available is never mistaken for one tuned without it.

LLVM is initialized once per process and target machines are cached per
(triple, cpu, features): a tuner builds thousands of kernels and none of this
changes between them.
"""

from __future__ import annotations

import ctypes
import difflib
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from compiler.target.errors import TargetError
from compiler.target.llvm_catalogue import catalogue

TARGET_FORMS = (
    '"llvm" (the host CPU)',
    '"llvm -mcpu=<cpu>"',
    '"llvm -mattr=+avx2,+fma"',
    '"llvm -num-cores=<n>"',
    '"llvm -mtriple=<triple>"',
)


# The features that change the generated code of a tensor program; others (e.g. ``+rdrnd``)
# stay out of the canonical string so it does not vary with irrelevant CPU details.
CODEGEN_FEATURES = (
    "avx",
    "avx2",
    "avx512bw",
    "avx512cd",
    "avx512dq",
    "avx512f",
    "avx512vl",
    "avx512vnni",
    "bmi",
    "bmi2",
    "f16c",
    "fma",
    "sse4.1",
    "sse4.2",
)
CACHE_DEFAULTS = {"l1d": 32 * 1024, "l2": 1024 * 1024, "l3": 32 * 1024 * 1024}
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class Capabilities:
    """What spaces and cost models size schedules by: parallel threads, vector width
    (bits, and float32 lanes), and the data cache sizes in bytes (read from the host
    where the target is the host, else common defaults)."""

    cores: int
    vector_bits: int
    float_lanes: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int


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
        return _parse_text(str(target))

    @property
    def codegen_features(self) -> tuple[str, ...]:
        """The code-generation features this target has (``CODEGEN_FEATURES``), sorted:
        those its ``-mattr`` enables, else those its CPU has."""
        features = self.features if self.features else _cpu_features(self.cpu)
        enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
        return tuple(sorted(f"+{name}" for name in enabled if name in CODEGEN_FEATURES))

    def lacks(self, other: LLVMTarget) -> tuple[str, ...]:
        """The code-generation features ``other`` has and this target does not: a
        schedule tuned for ``other`` is not one to replay here."""
        return tuple(sorted(set(other.codegen_features) - set(self.codegen_features)))

    @property
    def capabilities(self) -> Capabilities:
        caches = _host_caches() if self.cpu == llvm.get_host_cpu_name() else CACHE_DEFAULTS
        return Capabilities(
            cores=self.threads,
            vector_bits=self.vector_bits,
            float_lanes=self.vector_bits // 32,
            l1d_bytes=caches["l1d"],
            l2_bytes=caches["l2"],
            l3_bytes=caches["l3"],
        )

    @property
    def threads(self) -> int:
        """How many threads a parallel loop runs on, which the tuner sizes parallel
        loops by."""
        return self.num_cores or os.cpu_count() or 1

    @property
    def vector_bits(self) -> int:
        """The widest vector registers this CPU has, which the tuner sizes vector loops by."""
        features = self.codegen_features
        if "+avx512f" in features:
            return 512
        if "+avx" in features or "+avx2" in features:
            return 256
        return 128

    @property
    def vector_registers(self) -> int:
        """How many vector registers the CPU has: 32 with AVX-512, else 16 (SSE, AVX,
        AVX2); a register tile of accumulators is sized to fit them."""
        return 32 if self.vector_bits == 512 else 16

    def __str__(self) -> str:
        """The canonical spelling: ``llvm -mcpu=<cpu> -mattr=<features>`` and the
        thread count and triple where they are set."""
        parts = ["llvm", f"-mcpu={self.cpu}", f"-mattr={','.join(self.codegen_features)}"]
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        if self.triple:
            parts.append(f"-mtriple={self.triple}")
        return " ".join(parts)


def host_lacks(target: LLVMTarget) -> tuple[str, ...]:
    """The code-generation features ``target`` has and this host does not: code built
    for it may stop this process with an illegal instruction here."""
    return LLVMTarget.parse("llvm").lacks(target)


def unrunnable_here(target: str | LLVMTarget) -> str | None:
    """Why this host cannot run code built for ``target``, naming the fix; None when
    it can."""
    parsed = LLVMTarget.parse(target)
    lacking = host_lacks(parsed)
    if not lacking:
        return None
    return (
        f"it was built for {parsed}, which has {','.join(lacking)}, and this host lacks "
        "them; build for 'llvm' (the host) to run it here, or export it and run it on a "
        "host that has them"
    )


def _parse_options(target: str, tokens: list[str]) -> dict[str, str]:
    allowed = ("mcpu", "mattr", "num-cores", "mtriple")
    options: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.lstrip("-").partition("=")
        empty = not value and key != "mattr"  # a CPU may have no code-generation feature
        if not token.startswith("-") or not sep or key not in allowed or empty:
            raise TargetError(
                f"target {target!r}: cannot read option {token!r}; the options are "
                f"{', '.join('-' + a + '=...' for a in allowed)}"
            )
        options[key] = value
    return options


def _exact_features(target: str, mattr: str) -> str:
    """An ``-mattr`` list as LLVM reads it. AVX-512 is turned off unless it is named:
    a CPU whose name implies it (or a host whose virtual machine hides it) gets the
    vector width the target string says."""
    named = [f for f in mattr.split(",") if f]
    for feature in named:
        if feature[0] not in "+-" or len(feature) < 2:
            raise TargetError(
                f"target {target!r}: feature {feature!r} must be +name or -name, e.g. +avx2"
            )
    if "+avx512f" not in named and "-avx512f" not in named:
        named.append("-avx512f")
    return ",".join(named)


@functools.cache
def _host_caches() -> dict[str, int]:
    """L1 data, L2 and L3 sizes of this machine's first CPU, where Linux tells them."""
    caches = dict(CACHE_DEFAULTS)
    for index in sorted(CACHE_DIR.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _cache_bytes((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        name = {"1": "l1d", "2": "l2", "3": "l3"}.get(level)
        if name is not None and kind in ("Data", "Unified"):
            caches[name] = size
    return caches


def _cache_bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text[-1:] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


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


_AVX2_FEATURES = "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+sse4.1,+sse4.2"


def _cpu_features(cpu: str) -> str:
    """Features of a named CPU, for capability queries only (LLVM knows the full list)."""
    if cpu == llvm.get_host_cpu_name():
        return _host_features()
    if cpu.startswith(_AVX512_CPUS):
        return _AVX2_FEATURES + ",+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512vl"
    if cpu.startswith(_AVX2_CPUS):
        return _AVX2_FEATURES
    return ""


@functools.cache
def init_llvm() -> None:
    """Initialize LLVM's native target and load the OpenMP runtime, once per process.

    LLVM unloads the libraries it loaded when the process exits, while OpenMP's idle
    threads may still be spinning in libgomp's code (always, under
    ``OMP_WAIT_POLICY=active``): they would crash the exiting process. Loading libgomp
    once more with ``RTLD_NODELETE`` keeps it mapped until the process is gone."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    libgomp = _libgomp_path()
    llvm.load_library_permanently(libgomp)
    ctypes.CDLL(libgomp, mode=os.RTLD_GLOBAL | os.RTLD_NODELETE)


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


def check_supported(target: LLVMTarget, spelled: str) -> None:
    """Refuse a CPU or feature LLVM does not know, and one that cannot run code for a
    64-bit triple, before LLVM sees it: LLVM would ignore the name and then end the
    process while generating code. ``spelled`` is the target as the user wrote it."""
    init_llvm()
    triple = target.triple or llvm.get_process_triple()
    try:
        known = catalogue(triple)
    except RuntimeError as err:
        raise TargetError(
            f"target {spelled!r}: LLVM cannot generate code for {triple!r}; leave out "
            f"-mtriple for this machine's ({llvm.get_process_triple()})"
        ) from err
    listing = f"python -m compiler.target.llvm_catalogue lists those of {triple}"
    if target.cpu not in known.cpus:
        raise TargetError(
            f"target {spelled!r}: LLVM knows no CPU {target.cpu!r}"
            f"{_did_you_mean(target.cpu, known.cpus)}; leave out -mcpu for this machine's "
            f"({llvm.get_host_cpu_name()}) or name a known one ({listing})"
        )
    for feature in (f for f in target.features.split(",") if f):
        if feature[1:] not in known.features:
            raise TargetError(
                f"target {spelled!r}: LLVM knows no feature {feature[1:]!r}"
                f"{_did_you_mean(feature[1:], known.features)}; name known ones ({listing})"
            )
    if triple.startswith("x86_64"):
        _check_x86_64(target, spelled)


# CPUs without 64-bit instructions, which LLVM accepts for an x86-64 triple and then
# aborts on; a test builds for every CPU LLVM lists to keep this complete.
X86_32BIT_CPUS = frozenset(
    (
        "athlon athlon-4 athlon-mp athlon-tbird athlon-xp c3 c3-2 geode i386 i486 i586 "
        "i686 k6 k6-2 k6-3 lakemont pentium pentium-m pentium-mmx pentium2 pentium3 "
        "pentium3m pentium4 pentium4m pentium_4 pentium_4_sse3 pentium_ii pentium_iii "
        "pentium_iii_no_xmm_regs pentium_m pentium_mmx pentium_pro pentiumpro prescott "
        "winchip-c6 winchip2 yonah"
    ).split()
)
# What the x86-64 ABI itself needs: turning one off aborts LLVM while generating code.
X86_64_BASELINE = ("64bit", "sse", "sse2")


def _check_x86_64(target: LLVMTarget, spelled: str) -> None:
    if target.cpu in X86_32BIT_CPUS:
        raise TargetError(
            f"target {spelled!r}: CPU {target.cpu!r} cannot run 64-bit code; name a 64-bit "
            f"CPU (e.g. x86-64) or leave out -mcpu for this machine's ({llvm.get_host_cpu_name()})"
        )
    for feature in (f for f in target.features.split(",") if f):
        if feature[1:].endswith("-mode"):
            raise TargetError(
                f"target {spelled!r}: {feature!r} is set by the triple, not by -mattr; "
                "drop it from -mattr"
            )
        if feature[0] == "-" and feature[1:] in X86_64_BASELINE:
            raise TargetError(
                f"target {spelled!r}: x86-64 code needs {feature[1:]!r}, so it cannot be "
                f"turned off; drop {feature!r} from -mattr"
            )


def _did_you_mean(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


@functools.cache
def target_machine(target: LLVMTarget) -> llvm.TargetMachine:
    """The target machine for ``target``, shared by every build for that target."""
    check_supported(target, str(target))
    llvm_target = llvm.Target.from_triple(target.triple or llvm.get_process_triple())
    return llvm_target.create_target_machine(
        cpu=target.cpu, features=target.features, opt=3, reloc="pic", codemodel="default"
    )


@functools.lru_cache(maxsize=1024)
def _parse_text(target: str) -> LLVMTarget:
    """The target a string names, kept per string: a service parses the same few
    targets at every request, and each parse asks LLVM (under llvmlite's lock) for the
    host CPU and its features. A refusal is not kept."""
    tokens = target.split()
    if not tokens or tokens[0] != "llvm":
        raise TargetError(
            f"unknown target {target!r}; the allowed forms are {', '.join(TARGET_FORMS)}"
        )
    options = _parse_options(target, tokens[1:])
    cpu = options.get("mcpu")
    features = options.get("mattr")
    if features is not None:
        features = _exact_features(target, features)
    if cpu is None:
        cpu = llvm.get_host_cpu_name()
        features = _host_features() if features is None else features
    num_cores = _parse_num_cores(target, options.get("num-cores", "0"))
    parsed = LLVMTarget(cpu, features or "", num_cores, options.get("mtriple", ""))
    check_supported(parsed, target)
    return parsed
