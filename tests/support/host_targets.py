"""Targets a test can run here. A test that schedules for a wider machine than the
one it runs on (AVX-512 decisions on an AVX2 host) still checks the scheduled
program's results: it builds them for a target this host runs."""

from compiler.target.llvm import LLVMTarget, host_lacks


def runnable_here(target: str) -> str:
    """``target`` when this host runs code built for it, else the host's target with
    ``target``'s options (thread count) kept."""
    parsed = LLVMTarget.parse(target)
    if not host_lacks(parsed):
        return target
    kept = [token for token in target.split()[1:] if not token.startswith(("-mcpu", "-mattr"))]
    return " ".join(["llvm", *kept])
