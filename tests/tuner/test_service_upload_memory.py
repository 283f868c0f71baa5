"""A large model upload to ``tensortune serve``: the server writes the body to a file
as it comes and a process of its own imports and stores it, so the server's memory
grows by less than half the file's size (it grew by twice the size when it read the
body whole and parsed it)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from onnx_models import make_model, node
from serve_process import serve_process

from db import Role, SQLDatabase

SIDE = 7240  # a SIDE x SIDE float32 weight: 200 MiB


def memory_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None, f"no {field} in /proc/{pid}/status"
    return int(found.group(1))


@pytest.fixture
def large_model(tmp_path) -> Path:
    weight = np.random.default_rng(0).standard_normal((SIDE, SIDE), dtype=np.float32)
    model = make_model([node("MatMul", ["x", "w"], ["y"])], {"x": [1, SIDE]}, ["y"], {"w": weight})
    path = tmp_path / "large.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_200_mib_upload_grows_the_server_by_less_than_half_its_size(
    tmp_path, large_model
) -> None:
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    with SQLDatabase(url) as database:
        secret = database.create_token("admin", Role.ADMIN)[1]
    with serve_process(url, "--no-coordinator") as (running, address):
        headers = {"Authorization": f"Bearer {secret}"}
        with httpx.Client(base_url=address, headers=headers, timeout=600) as client:
            assert client.get("/v1/jobs").status_code == 200  # the routes' first use
            before = memory_kib(running.pid, "VmRSS")
            with large_model.open("rb") as body:
                answer = client.post(
                    "/v1/models",
                    params={"name": "large"},
                    content=body,
                    headers={"Content-Type": "application/octet-stream"},
                )
            assert answer.status_code == 200, answer.text
            assert answer.json()["inputs"] == {"x": [1, SIDE]}
            peak = memory_kib(running.pid, "VmHWM")
    size_kib = large_model.stat().st_size // 1024
    assert peak - before < size_kib // 2, (before, peak, size_kib)
