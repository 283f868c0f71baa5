"""Host kinds: which Ray resource marks a node as a host for a target."""

from __future__ import annotations

import pytest

from compiler.target.llvm import LLVMTarget
from workers import WorkersError
from workers.hosts import host_resource, served_targets


def test_an_llvm_target_names_its_cpu_whatever_its_threads_or_features() -> None:
    here = LLVMTarget.parse("llvm").cpu
    assert host_resource("llvm") == f"target:llvm -mcpu={here}"
    assert host_resource("llvm -mcpu=haswell -mattr=+avx2") == "target:llvm -mcpu=haswell"
    assert host_resource("llvm -mcpu=haswell -num-cores=4") == "target:llvm -mcpu=haswell"


def test_a_cuda_target_names_its_architecture() -> None:
    assert host_resource("cuda -arch=sm_90") == "target:cuda -arch=sm_90"
    with pytest.raises(WorkersError, match="-arch"):
        host_resource("cuda")


def test_a_target_naming_no_host_is_refused() -> None:
    with pytest.raises(WorkersError, match="no-such-cpu"):
        host_resource("llvm -mcpu=no-such-cpu")


def test_a_node_serves_the_targets_of_its_host_kind_resources() -> None:
    resources = {"CPU": 2.0, "target:llvm -mcpu=haswell": 1.0, "target:cuda -arch=sm_80": 0.0}
    assert served_targets(resources) == frozenset({"target:llvm -mcpu=haswell"})
