"""Models sent to the service: an ONNX file is imported before it is stored (so a
file that is no model, or a model the compiler cannot take, is refused with what is
wrong and nothing is kept), and its tasks are what a model job tunes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compiler.graph import Graph, GraphError, import_onnx
from db import ModelFile, SQLDatabase
from tuner.model_tasks import ModelTask, extract_tasks
from tuner.service.schemas import ModelTaskView, ModelView


class ModelFileError(ValueError):
    """A model file the service cannot take; the message says why."""


def read_model(content: bytes, shapes: Mapping[str, Sequence[int]]) -> Graph:
    """The graph of an ONNX file; ModelFileError when it does not import."""
    try:
        return import_onnx(content, shapes=shapes)
    except GraphError as err:
        raise ModelFileError(str(err)) from None


def store_model(
    database: SQLDatabase,
    name: str,
    content: bytes,
    shapes: Mapping[str, Sequence[int]],
    *,
    token_id: int | None,
) -> tuple[ModelFile, bool, Graph]:
    """Import the file, then store it (once per set of shapes: the same bytes with the
    same shapes again are the same model)."""
    graph = read_model(content, shapes)
    stored, new = database.commit_model_file(name, content, shapes, token_id=token_id)
    return stored, new, graph


def model_view(stored: ModelFile, new: bool, graph: Graph) -> ModelView:
    """A stored model as the API shows it: its inputs and tasks."""
    tasks = [
        ModelTaskView(
            workload_key=task.task.workload_key,
            kind=task.kind,
            weight=task.weight,
            flop_count=task.task.flop_count,
            worth_tuning=task.worth_tuning,
        )
        for task in extract_tasks(graph)
    ]
    return ModelView(
        id=stored.id,
        name=stored.name,
        digest=stored.digest,
        size=stored.size,
        created_at=stored.created_at,
        stored_now=new,
        inputs={name: list(kind.shape) for name, kind in graph.inputs.items()},
        tasks=tasks,
    )


def model_tasks(database: SQLDatabase, model_id: int, target: str) -> list[ModelTask]:
    """The tasks of a stored model on ``target``, imported with its stored shapes."""
    stored = database.model_file(model_id)
    return extract_tasks(read_model(database.model_content(model_id), stored.shapes), target)
