"""A model file read in a process of its own: ``python -m tuner.service.model_check``
takes one JSON request on standard input and answers one JSON line on standard output.

``{"url": URL, "path": PATH, "name": NAME, "shapes": {...}, "token_id": ID}`` imports
the file at PATH (a model the compiler cannot take is ``{"error": why}``) and stores it
in the database at URL; ``{"url": URL, "model_id": ID}`` describes a stored model.
Either answers ``{"view": ...}``, the model as ``GET /v1/models/{id}`` shows it.

The service sends every model file here rather than parse it itself: importing a
model holds the file's bytes and their parse at once (about twice the file's size),
and an upload is a file from a client. In a process of its own that memory is
given back when the process ends, and a file that crashes the parser costs the request,
not the server.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from db import SQLDatabase
from tuner.service.model_files import (
    ModelFileError,
    model_contents,
    model_view,
    read_stored_model,
    store_model,
)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    with SQLDatabase(request["url"], create=False) as database:
        if "model_id" in request:
            stored = database.model_file(request["model_id"])
            contents = model_contents(read_stored_model(database, stored))
            return {"view": model_view(stored, False, contents).model_dump(mode="json")}
        try:
            view = store_model(
                database,
                request["name"],
                request["path"],
                request["shapes"],
                token_id=request["token_id"],
            )
        except ModelFileError as err:
            return {"error": str(err)}
        return {"view": view.model_dump(mode="json")}


def main() -> None:
    print(json.dumps(answer(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()
