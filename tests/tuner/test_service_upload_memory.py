"""A large model upload to ``tensortune serve``: the server writes the body to a file
as it comes and a process of its own imports and stores it, so the server's memory
grows by less than half the file's size (it grew by twice the size when it read the
body whole and parsed it). That process holds about twice the file: its bytes and
their parse, at once, and nothing more."""

from __future__ import annotations

import json
import re
import subprocess
import sys
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


def matmul_model(path: Path, side: int) -> Path:
    weight = np.random.default_rng(0).standard_normal((side, side), dtype=np.float32)
    model = make_model([node("MatMul", ["x", "w"], ["y"])], {"x": [1, side]}, ["y"], {"w": weight})
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def large_model(tmp_path) -> Path:
    return matmul_model(tmp_path / "large.onnx", SIDE)


# The check process, then its peak memory (VmHWM, which starts anew at exec; the
# peak that wait4 reports would include this process's own, inherited at fork).
CHECK_AND_PEAK = """
import pathlib, re, sys
from tuner.service import model_check
model_check.main()
status = pathlib.Path("/proc/self/status").read_text()
print(re.search(r"^VmHWM:\\s+(\\d+) kB", status, re.MULTILINE).group(1), file=sys.stderr)
"""


def checked_with_peak(request: dict[str, object]) -> tuple[dict[str, object], int]:
    """The answer of a check process to ``request`` and the process's peak memory, KiB."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK_AND_PEAK],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout), int(done.stderr.split()[-1])


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


def test_the_check_process_holds_a_model_file_about_twice(tmp_path, large_model) -> None:
    """Its peak over that of checking a tiny model: under 2.5 times the file, for an
    upload and for a stored model's view. It was 4.0 times when the process kept the
    file's bytes, their parse and the graph together, and stored the file as one
    value."""
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    SQLDatabase(url).close()
    tiny = matmul_model(tmp_path / "tiny.onnx", 8)
    peaks = {}
    for name, path in (("tiny", tiny), ("large", large_model)):
        upload = {"url": url, "path": str(path), "name": name, "shapes": {}, "token_id": None}
        answer, peaks[name] = checked_with_peak(upload)
        stored = answer["view"]
        assert isinstance(stored, dict) and stored["name"] == name
        view, peaks[f"{name} view"] = checked_with_peak({"url": url, "model_id": stored["id"]})
        assert view == {"view": {**stored, "stored_now": False}}
    size_kib = large_model.stat().st_size // 1024
    assert peaks["large"] - peaks["tiny"] < 2.5 * size_kib, (peaks, size_kib)
    assert peaks["large view"] - peaks["tiny view"] < 2.5 * size_kib, (peaks, size_kib)
