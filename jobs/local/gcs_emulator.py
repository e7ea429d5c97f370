"""The local platform's GCS: gcp-storage-emulator (PyPI) plus the one JSON API call it lacks.

`python -m jobs.local.gcs_emulator start --host 127.0.0.1 --port N ...` (same options as
`gcp-storage-emulator start`).

Why the addition: gcsfs implements ``mv`` with GCS's ``objects.move``
(``POST /storage/v1/b/{bucket}/o/{object}/moveTo/o/{destination}``). The emulator answers it
with 501, which gcsfs treats as retriable: six retries with exponential backoff, about 31 s,
before it falls back to copy + delete. torch.distributed.checkpoint's fsspec writer renames its
metadata file on every save, so each checkpoint would stall half a minute against the emulator
and never against GCS. The handler below gives the emulator the move call, built from its own
copy and delete (written against gcp-storage-emulator 2026.7; the route table is module data).
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

from gcp_storage_emulator import server, settings
from gcp_storage_emulator.exceptions import Conflict, NotFound
from gcp_storage_emulator.handlers import objects


def move(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> None:
    """objects.move: same-bucket rename; answers the destination object, as GCS does."""
    bucket = request.params["bucket_name"]
    try:
        moved = objects._copy(
            request.base_url,
            storage,
            bucket,
            request.params["object_id"],
            bucket,
            request.params["dest_object_id"],
        )
    except NotFound:
        response.status = HTTPStatus.NOT_FOUND
        return
    except Conflict as err:
        objects._handle_conflict(response, err)
        return
    objects._delete(storage, bucket, request.params["object_id"])
    response.json(moved)


def _move_routes() -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple(
        (
            rf"^{prefix}/b/(?P<bucket_name>[-.\w]+)/o/(?P<object_id>.*[^/]+)/moveTo/o/"
            rf"(?P<dest_object_id>.*[^/]+)$",
            {server.POST: move},
        )
        for prefix in (settings.API_ENDPOINT, "")
    )


def install_move() -> None:
    """Put the move routes first: the generic object route would otherwise match them."""
    if not any(move in handlers.values() for _, handlers in server.HANDLERS):
        server.HANDLERS = (*_move_routes(), *server.HANDLERS)


def main() -> None:
    from gcp_storage_emulator.__main__ import main as emulator_main

    install_move()
    emulator_main(sys.argv[1:])


if __name__ == "__main__":
    main()
