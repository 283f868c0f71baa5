"""A Python client of the tuning service (``tensortune serve``), on httpx.

    from tuner.client import Client
    with Client("http://tuning:8000", token) as service:
        job = service.submit([{"op": "matmul", "args": {"m": 256, "n": 256, "k": 256}}])
        for update in service.events(job["id"]):
            print(update["status"], [t["trials_done"] for t in update["tasks"]])
        print(service.best(job["tasks"][0]["workload_key"])[0]["python"])

Answers are the JSON the API documents (``/openapi.json``); a refusal raises
ServiceError with the HTTP status and the server's reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import httpx

API = "/v1"


class ServiceError(RuntimeError):
    """The service refused a call (``status`` is the HTTP status) or could not be reached
    (``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, server: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)

    def submit(
        self,
        workloads: Sequence[Mapping[str, Any]],
        *,
        target: str = "llvm",
        targets: Sequence[str] = (),
        trials: int = 64,
        tuner: str = "auto",
        space: str = "auto",
        seed: int = 0,
        priority: int = 0,
        model: int | None = None,
        scheduler: str = "gradient",
    ) -> dict[str, Any]:
        """Queue a job tuning each workload (an operator spec) on ``target``, or on each
        of ``targets``, for ``trials`` trials; or, with ``model`` (an id from
        ``upload_model``) and no workloads, the model's tasks, which share ``trials``
        as ``scheduler`` decides. Queued jobs of a higher ``priority`` run first."""
        body: dict[str, Any] = {"targets": list(targets)} if targets else {"target": target}
        if model is not None:
            body |= {"model": model, "scheduler": scheduler}
        body |= {
            "workloads": [dict(w) for w in workloads],
            "trials": trials,
            "tuner": tuner,
            "space": space,
            "seed": seed,
            "priority": priority,
        }
        return self._call("POST", f"{API}/jobs", json=body)

    def upload_model(
        self, content: bytes, name: str, shapes: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, Any]:
        """Store an ONNX model (its file's bytes) on the service; the answer has its id
        and its tasks. ``shapes`` fixes the dimensions its inputs leave open."""
        params = {
            "name": name,
            "shape": [f"{k}={','.join(map(str, v))}" for k, v in (shapes or {}).items()],
        }
        headers = {"Content-Type": "application/octet-stream"}
        return self._call("POST", f"{API}/models", params=params, content=content, headers=headers)

    def jobs(
        self, status: str | None = None, *, limit: int = 100, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Jobs newest first (in ``status`` only, when given); the next page is the
        jobs ``before_id`` the last one's id."""
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        if before_id is not None:
            params["before_id"] = before_id
        return self._call("GET", f"{API}/jobs", params=params)

    def job(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"{API}/jobs/{job_id}")

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self._call("POST", f"{API}/jobs/{job_id}/cancel")

    def best(
        self, workload: str | Mapping[str, Any], *, target: str = "llvm", k: int = 1
    ) -> list[dict[str, Any]]:
        """The ``k`` fastest stored schedules of ``workload`` (a stored workload's key,
        or an operator spec) on ``target``, the fastest first."""
        if isinstance(workload, str):
            params = {"target": target, "k": k}
            return self._call("GET", f"{API}/workloads/{workload}/best", params=params)
        body = {"workload": dict(workload), "target": target, "k": k}
        return self._call("POST", f"{API}/best", json=body)

    def events(self, job_id: int) -> Iterator[dict[str, Any]]:
        """The job each time it changes, from the service's event stream, until it is
        finished (the last one is the finished job)."""
        url = f"{API}/jobs/{job_id}/events"
        try:
            with self._http.stream("GET", url, timeout=None) as answer:
                _check(answer, read=True)
                event = None
                for line in answer.iter_lines():
                    if line.startswith("event:"):
                        event = line.partition(":")[2].strip()
                    elif line.startswith("data:") and event == "job":
                        yield json.loads(line.partition(":")[2])
                    elif not line and event == "end":
                        return
        except httpx.TransportError as err:
            raise ServiceError(0, f"{self.server}: {err}") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **options: Any) -> Any:
        try:
            answer = self._http.request(method, path, **options)
        except httpx.TransportError as err:
            raise ServiceError(0, f"{self.server}: {err}") from None
        _check(answer)
        return answer.json()


def _check(answer: httpx.Response, *, read: bool = False) -> None:
    if answer.is_success:
        return
    if read:
        answer.read()
    try:
        detail = answer.json().get("detail", answer.text)
    except ValueError:
        detail = answer.text
    if not isinstance(detail, str):
        detail = json.dumps(detail)
    raise ServiceError(answer.status_code, f"HTTP {answer.status_code}: {detail}")
