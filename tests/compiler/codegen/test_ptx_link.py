"""PTX to cubin through nvJitLink, with no GPU: real PTX from llvmlite's NVPTX back
end, linked for two architectures, and the per-kernel usage read from the log."""

from __future__ import annotations

import sys

import pytest
from gpu_kernels import ptx

from compiler.codegen.llvm_types import CodegenError
from compiler.codegen.ptx_link import KernelUsage, link_ptx, parse_usage
from compiler.errors import MissingExtraError

nvjitlink = pytest.importorskip(
    "cuda.bindings.nvjitlink", reason="needs the cuda extra: pip install 'tensortune[cuda]'"
)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_real_ptx_links_into_a_cubin_with_each_kernels_usage(arch: str) -> None:
    linked = link_ptx(ptx(arch), arch)
    assert linked.cubin[:4] == b"\x7fELF"
    assert set(linked.usage) == {"reverse", "double", "add", "fault", "hang"}
    reverse = linked.usage["reverse"]
    assert reverse.shared_bytes == 256 * 4  # the kernel's one shared array
    assert 0 < reverse.registers <= 255
    assert (reverse.spill_store_bytes, reverse.spill_load_bytes) == (0, 0)
    assert linked.usage["add"].shared_bytes == 0


def test_the_cubin_is_for_the_architecture_asked() -> None:
    text = ptx("sm_80")
    assert link_ptx(text, "sm_80").cubin != link_ptx(text, "sm_90").cubin


def test_malformed_ptx_is_refused_with_the_assemblers_complaint() -> None:
    broken = ptx("sm_80").replace("bar.sync", "bogus.sync", 1)
    with pytest.raises(CodegenError, match="sm_80") as caught:
        link_ptx(broken, "sm_80")
    assert "bogus" in str(caught.value) and "line" in str(caught.value)


def test_an_unknown_architecture_is_named() -> None:
    with pytest.raises(CodegenError, match="sm_12"):
        link_ptx(ptx("sm_80"), "sm_12")


def test_usage_reads_spills_and_kernels_without_shared_memory() -> None:
    log = "\n".join(
        [
            "ptxas info    : 0 bytes gmem",
            "ptxas info    : Compiling entry function 'tiled' for 'sm_80'",
            "ptxas info    : Function properties for tiled",
            "ptxas         .     24 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads",
            "ptxas info    : Used 255 registers, used 1 barriers, 34816 bytes smem",
            "ptxas info    : Compiling entry function 'plain' for 'sm_80'",
            "ptxas info    : Function properties for plain",
            "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            "ptxas info    : Used 8 registers, 360 bytes cmem[0]",
            "info    : Function properties for 'tiled':",
            "info    : used 255 registers, used 1 barriers, 24 stack, 34816 bytes smem",
        ]
    )
    assert parse_usage(log) == {
        "tiled": KernelUsage(255, 34816, 16, 12),
        "plain": KernelUsage(8, 0, 0, 0),
    }


def test_the_link_handle_is_destroyed_on_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    destroyed: list[int] = []
    create, destroy = nvjitlink.create, nvjitlink.destroy

    def counted_create(*args: object) -> int:
        made.append(create(*args))
        return made[-1]

    def counted_destroy(handle: int) -> None:
        destroyed.append(handle)
        destroy(handle)

    monkeypatch.setattr(nvjitlink, "create", counted_create)
    monkeypatch.setattr(nvjitlink, "destroy", counted_destroy)
    link_ptx(ptx("sm_80"), "sm_80")
    with pytest.raises(CodegenError):
        link_ptx("not ptx", "sm_80")
    assert len(made) == 2 and destroyed == made


def test_missing_bindings_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import cuda.bindings

    monkeypatch.setitem(sys.modules, "cuda.bindings.nvjitlink", None)
    monkeypatch.delattr(cuda.bindings, "nvjitlink")
    with pytest.raises(MissingExtraError, match=r"pip install 'tensortune\[cuda\]'"):
        link_ptx(ptx("sm_80"), "sm_80")


def test_a_missing_nvjitlink_library_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_library(*args: object) -> int:
        raise RuntimeError('"nvJitLink" is not found')  # as cuda.pathfinder raises it

    monkeypatch.setattr(nvjitlink, "create", no_library)
    with pytest.raises(MissingExtraError, match=r"libnvJitLink.*pip install 'tensortune\[cuda\]'"):
        link_ptx(ptx("sm_80"), "sm_80")
