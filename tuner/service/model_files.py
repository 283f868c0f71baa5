"""Models sent to the service: an ONNX file is imported before it is stored (so a
file that is no model, or a model the compiler cannot take, is refused with what is
wrong and nothing is kept), and its tasks are what a model job tunes."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compiler.graph import Graph, GraphError, import_onnx
from db import ModelFile, ModelStore
from tuner.model_tasks import ModelTask, extract_tasks
from tuner.service.schemas import ModelTaskView, ModelView


class ModelFileError(ValueError):
    """A model file the service cannot take; the message says why."""


def read_model(path: str, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """The graph of the ONNX file at ``path``; ModelFileError when it does not import.
    Imported from the file, not from bytes, so its bytes and their parse are never held
    together with the weights."""
    try:
        return import_onnx(path, shapes=shapes)
    except GraphError as err:
        raise ModelFileError(str(err)) from None


@dataclass(frozen=True)
class ModelContents:
    """What the API shows of a model's graph: its inputs and its tasks."""

    inputs: dict[str, list[int]]
    tasks: list[ModelTaskView]


def model_contents(graph: Graph) -> ModelContents:
    return ModelContents(
        inputs={name: list(kind.shape) for name, kind in graph.inputs.items()},
        tasks=[
            ModelTaskView(
                workload_key=task.task.workload_key,
                kind=task.kind,
                weight=task.weight,
                flop_count=task.task.flop_count,
                worth_tuning=task.worth_tuning,
            )
            for task in extract_tasks(graph)
        ],
    )


def store_model(
    database: ModelStore,
    name: str,
    path: str,
    shapes: Mapping[str, Sequence[int]],
    *,
    token_id: int | None,
) -> ModelView:
    """Import the file at ``path``, then store it (once per set of shapes: the same bytes
    with the same shapes again are the same model). The graph, whose weights are as
    large as the file, is gone before the file is stored, a piece at a time."""
    contents = model_contents(read_model(path, shapes))
    with open(path, "rb") as file:
        stored, new = database.commit_model_file(name, file, shapes, token_id=token_id)
    return model_view(stored, new, contents)


def model_view(stored: ModelFile, new: bool, contents: ModelContents) -> ModelView:
    """A stored model as the API shows it."""
    return ModelView(
        id=stored.id,
        name=stored.name,
        digest=stored.digest,
        size=stored.size,
        created_at=stored.created_at,
        stored_now=new,
        inputs=contents.inputs,
        tasks=contents.tasks,
    )


def read_stored_model(database: ModelStore, stored: ModelFile) -> Graph:
    """The graph of a stored model, imported with its stored shapes. The file is copied
    to a temporary one to import it from: its bytes are never held whole, only their
    parse."""
    with tempfile.NamedTemporaryFile(prefix="tensortune-model-", suffix=".onnx") as copy:
        database.write_model_content(stored.id, copy)
        copy.flush()
        return read_model(copy.name, stored.shapes)


def model_tasks(database: ModelStore, model_id: int, target: str) -> list[ModelTask]:
    """The tasks of a stored model on ``target``."""
    return extract_tasks(read_stored_model(database, database.model_file(model_id)), target)
