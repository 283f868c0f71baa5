"""Whole models through the service: an ONNX file sent over HTTP, its tasks, a model
job run by a coordinator on real local workers, and the tuned model against
onnxruntime; bad files and bad model jobs refused with what is wrong."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import numpy as np
import onnxruntime
import pytest
from file_opens import files_opened
from onnx_models import dynamic_batch, external_data, mlp, repeated_blocks, unsupported_ops
from service_server import serving

from compiler.graph import GraphModule, import_onnx
from db import MemoryDatabase, RecordError, Role
from tuner.client import Client, ServiceError
from tuner.service import create_app, model_check, model_routes
from tuner.service.coordinator import Coordinator

OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture
def client(server, admin) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server, timeout=60, headers={"Authorization": f"Bearer {admin}"}
    ) as c:
        yield c


def upload(client: httpx.Client, content: bytes, **params: object) -> httpx.Response:
    return client.post(
        "/v1/models", params={"name": "m", **params}, content=content, headers=OCTETS
    )


def test_a_model_file_is_stored_once_with_its_tasks(client, rng) -> None:
    content = repeated_blocks(rng, copies=3).SerializeToString()
    first = upload(client, content)
    assert first.status_code == 200, first.text
    stored = first.json()
    assert stored["stored_now"] and stored["size"] == len(content)
    convolutions = [t for t in stored["tasks"] if t["kind"].startswith("conv2d")]
    # The 3x3 convolution, blocked: direct, Winograd F(2x2) and F(4x4), each twice (the
    # first block reads the NCHW input in place: tasks of their own).
    assert [t["kind"] for t in convolutions] == [
        "conv2d_nchwc_add_relu",
        "conv2d_nchwc_add_relu[winograd2]",
        "conv2d_nchwc_add_relu[winograd4]",
    ]
    assert [t["weight"] for t in convolutions] == [2, 2, 2]
    assert all(t["worth_tuning"] for t in convolutions)
    again = upload(client, content).json()
    assert again["id"] == stored["id"] and not again["stored_now"]
    shown = client.get(f"/v1/models/{stored['id']}").json()
    assert shown["tasks"] == stored["tasks"] and shown["inputs"] == stored["inputs"]
    assert client.get("/v1/models/999").status_code == 404


@pytest.mark.parametrize(
    ("content", "params", "said"),
    [
        (b"not a model", {}, "body:"),
        ("unsupported", {}, "TopK"),
        ("dynamic", {}, "--shape x="),
        ("dynamic", {"shape": "x=1,a"}, "query.shape"),
    ],
)
def test_a_file_that_is_no_model_we_take_is_422_and_nothing_is_stored(
    client, database, rng, content, params, said
) -> None:
    models = {"unsupported": unsupported_ops, "dynamic": dynamic_batch}
    body = content if isinstance(content, bytes) else models[content](rng).SerializeToString()
    answer = upload(client, body, **params)
    assert answer.status_code == 422 and said in answer.json()["detail"], answer.text
    with pytest.raises(RecordError, match="no model file"):
        database.model_file(1)


def test_a_model_naming_a_file_beside_the_server_is_refused_unopened(
    client, database, rng, tmp_path, monkeypatch
) -> None:
    """The weights' bytes lie in a file of the server's working directory, where an
    import that followed the model's external data would read them. The check process's
    code runs in this process here, so that the files it opens are seen."""
    model = mlp(rng)
    beside = tmp_path / "weights.bin"
    beside.write_bytes(external_data(model.graph.initializer[0], "weights.bin"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(model_routes, "_checked", model_check.answer)
    with files_opened() as opened:
        answer = upload(client, model.SerializeToString())
    assert answer.status_code == 422, answer.text
    assert "the initializer 'w1' keeps its data in another file" in answer.json()["detail"]
    assert beside not in opened
    with pytest.raises(RecordError, match="no model file"):
        database.model_file(1)


def test_a_dynamic_input_fixed_by_shape_is_taken(client, rng) -> None:
    answer = upload(client, dynamic_batch(rng).SerializeToString(), shape="x=2,8")
    assert answer.status_code == 200 and answer.json()["inputs"]["x"][0] == 2


def test_the_same_file_with_other_shapes_is_another_model(client, rng) -> None:
    """Each upload answers, stores and shows the model of its own shapes; the first
    model keeps its shapes."""
    content = dynamic_batch(rng).SerializeToString()
    two = upload(client, content, shape="x=2,8").json()
    four = upload(client, content, shape="x=4,8").json()
    assert four["stored_now"] and four["id"] != two["id"]
    assert (two["inputs"]["x"][0], four["inputs"]["x"][0]) == (2, 4)
    assert client.get(f"/v1/models/{two['id']}").json()["inputs"]["x"][0] == 2
    assert client.get(f"/v1/models/{four['id']}").json()["inputs"]["x"][0] == 4
    again = upload(client, content, shape="x=2,8").json()
    assert again["id"] == two["id"] and not again["stored_now"]


def test_a_model_job_tunes_the_tasks_of_the_model_and_the_result_is_right(
    client, database, backend, rng
) -> None:
    model = mlp(rng)
    stored = upload(client, model.SerializeToString()).json()
    body = {"model": stored["id"], "trials": 12, "tuner": "random", "scheduler": "round-robin"}
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 201, submitted.text
    job = submitted.json()
    tuned = [t for t in stored["tasks"] if t["worth_tuning"]]
    assert [t["workload_key"] for t in job["tasks"]] == [t["workload_key"] for t in tuned]
    Coordinator(database, backend).run_next()
    done = client.get(f"/v1/jobs/{job['id']}").json()
    assert done["status"] == "done", done
    assert sum(t["trials_done"] for t in done["tasks"]) == 12
    assert all(t["status"] == "done" and t["best_gflops"] for t in done["tasks"])
    trials = client.get(f"/v1/jobs/{job['id']}/trials").json()
    assert len(trials) == 12  # every measurement carries the job
    graph = import_onnx(model)
    inputs = {n: rng.standard_normal(k.shape).astype(k.dtype) for n, k in graph.inputs.items()}
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    ours = GraphModule(graph, database=database).run(**inputs).values()
    for mine, theirs in zip(ours, session.run(None, inputs), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"model": 999, "trials": 4}, "model: no model file"),
        ({"model": 1, "workloads": [{"op": "relu", "args": {"shape": [4]}}]}, "model:"),
        ({"model": 1, "scheduler": "greedy"}, "scheduler"),
        ({"model": 1, "target": "llvm -mcpu=no-such-cpu"}, "no-such-cpu"),
    ],
)
def test_a_bad_model_job_is_422_naming_what_is_wrong(client, database, rng, body, said) -> None:
    upload(client, mlp(rng).SerializeToString())
    answer = client.post("/v1/jobs", json=body)
    assert answer.status_code == 422 and said in answer.json()["detail"], answer.text
    assert database.jobs() == []


def test_submit_model_from_the_command_line(server, admin, tmp_path, rng) -> None:
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp(rng).SerializeToString())
    service = ["--server", server, "--token", admin]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner.cli.main",
            "submit-model",
            str(path),
            "--trials",
            "8",
            *service,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "tasks worth tuning" in done.stdout and "job 1 queued" in done.stdout
    with Client(server, admin) as client:
        assert client.job(1)["request"]["model"] == 1
        with pytest.raises(ServiceError, match="422"):
            client.upload_model(b"garbage", "g")


def test_a_stored_model_is_read_whole_once(client, rng, monkeypatch) -> None:
    stored = upload(client, mlp(rng).SerializeToString()).json()
    checks = []
    check = model_routes._checked
    monkeypatch.setattr(
        model_routes, "_checked", lambda request: checks.append(request) or check(request)
    )
    shown = [client.get(f"/v1/models/{stored['id']}").json() for _ in range(3)]
    assert shown[0] == shown[2] and shown[0]["tasks"] == stored["tasks"]
    assert [request["model_id"] for request in checks] == [stored["id"]]


def test_a_file_over_its_token_upload_limit_is_413_and_stores_nothing(
    server, database, rng
) -> None:
    _, secret = database.create_token("small", Role.SUBMIT, upload_limit=1024)
    content = mlp(rng).SerializeToString()
    assert len(content) > 1024
    headers = {"Authorization": f"Bearer {secret}", **OCTETS}
    with httpx.Client(base_url=server, timeout=60, headers=headers) as small:
        declared = small.post("/v1/models", params={"name": "m"}, content=content)
        streamed = small.post("/v1/models", params={"name": "m"}, content=iter([content]))
    for answer in (declared, streamed):
        assert answer.status_code == 413, answer.text
        assert "upload limit of token 'small'" in answer.json()["detail"]
    with pytest.raises(RecordError, match="no model file"):
        database.model_file(1)


def test_a_check_process_that_fails_is_a_model_check_error(tmp_path) -> None:
    """The check process ends with an error of its own (here: no database at its URL);
    the route answers that as a 422 naming it, never a 500."""
    missing = f"sqlite:///{tmp_path / 'absent' / 'tune.db'}"
    with pytest.raises(model_routes.ModelCheckError, match="the process reading the model"):
        model_routes._checked({"url": missing, "model_id": 1})


def test_a_check_past_its_deadline_is_422_and_stores_nothing(
    client, database, rng, monkeypatch
) -> None:
    """A check process that runs past ``CHECK_TIMEOUT_S`` is killed; the upload answers
    422 naming the deadline. (Starting the process alone takes longer than 0.05 s.)"""
    monkeypatch.setattr(model_routes, "CHECK_TIMEOUT_S", 0.05)
    answer = upload(client, mlp(rng).SerializeToString())
    assert answer.status_code == 422, answer.text
    assert "took longer than 0.05 s" in answer.json()["detail"]
    with pytest.raises(RecordError, match="no model file"):
        database.model_file(1)


def test_a_server_over_a_memory_database_refuses_model_files_with_501(rng) -> None:
    """A model file is read in a process of its own, which opens the database again
    by its URL; a database in memory has none, so the model routes say so and every
    other route answers as over SQL."""
    database = MemoryDatabase()
    secret = database.create_token("admin", Role.ADMIN)[1]
    with (
        serving(create_app(database)) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as memory,
    ):
        refused = upload(memory, mlp(rng).SerializeToString())
        assert refused.status_code == 501
        assert "in its memory" in refused.json()["detail"]
        assert memory.get("/v1/models/1").status_code == 501
        assert memory.get("/healthz").status_code == 200
        assert memory.get("/v1/workloads").status_code == 200
