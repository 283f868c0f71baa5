"""Targets a test can run here. A test that schedules for a wider machine than the
one it runs on (AVX-512 decisions on an AVX2 host) still checks the scheduled
program's results: it builds them for a target this host runs."""

from compiler.target.llvm import LLVMTarget, unrunnable_here


def runnable_here(target: str) -> str:
    """``target`` when this host runs code built for it, else the host's target with
    ``target``'s thread count."""
    if unrunnable_here(target) is None:
        return target
    cores = LLVMTarget.parse(target).num_cores
    return f"llvm -num-cores={cores}" if cores else "llvm"
