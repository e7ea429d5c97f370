"""The local platform's GCS: gcp-storage-emulator (PyPI), hardened, plus the one JSON API call
it lacks.

`python -m jobs.local.storage.gcs_emulator --host 127.0.0.1 --port N [--in-memory] [-q]`, objects
kept
under ``./.cloudstorage`` of the working directory.

What is added to the emulator, and why:
- The checks of jobs/local/platform/guard.py before any route: the user who started it only (Linux),
  loopback ``Host`` only, no browser requests. The emulator serves that user's SDKs and gcsfs,
  never a web page.
- GCS's naming rules for buckets and objects (a 400, as GCS answers). The emulator maps names
  to files: a bucket named ``.`` or an object named ``a/../b`` would otherwise read or
  overwrite objects of another bucket, and a NUL or an over-long name dropped the connection.
- No ``/wipe``: the emulator's reset endpoint deletes every object on a plain GET.
- An unexpected error is a 500 in Google's error shape instead of a dropped connection.
- ``objects.move``: gcsfs implements ``mv`` with GCS's ``objects.move``
  (``POST /storage/v1/b/{bucket}/o/{object}/moveTo/o/{destination}``). The emulator answers it
  with 501, which gcsfs treats as retriable: six retries with exponential backoff, about 31 s,
  before it falls back to copy + delete. torch.distributed.checkpoint's fsspec writer renames
  its metadata file on every save, so each checkpoint would stall half a minute against the
  emulator and never against GCS. The handler below builds it from the emulator's own copy and
  delete.
Written against gcp-storage-emulator 2026.7: its route table is module data, its request
handler creates a ``Router`` per request, and its ``Storage`` is the one place names become
paths; each is extended here by subclassing or by a new route table, not by editing the package.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
from functools import partial
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from gcp_storage_emulator import server, settings
from gcp_storage_emulator.exceptions import Conflict, NotFound
from gcp_storage_emulator.handlers import objects
from gcp_storage_emulator.storage import Storage

from jobs.local.platform.guard import (
    Refusal,
    bucket_name_problem,
    error_body,
    object_name_problem,
    origin_refusal,
    peer_refusal,
)

log = logging.getLogger(__name__)

BUCKET_PARAMS = ("bucket_name", "dest_bucket_name")
OBJECT_PARAMS = ("object_id", "dest_object_id")
RESET_ROUTES = (r"^/wipe$",)


class InvalidName(ValueError):
    """A bucket or object name GCS would refuse (or the emulator cannot hold safely)."""


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


def routes() -> tuple[tuple[str, dict[str, Any]], ...]:
    """The emulator's routes with move first (the generic object route would match it) and
    without the reset endpoint."""
    kept = tuple(route for route in server.HANDLERS if route[0] not in RESET_ROUTES)
    return (*_move_routes(), *kept)


def install_routes() -> None:
    if not any(move in handlers.values() for _, handlers in server.HANDLERS):
        server.HANDLERS = routes()


# -- names ---------------------------------------------------------------------------------------


def _require(problem: str | None) -> None:
    if problem is not None:
        raise InvalidName(problem)


class CheckedStorage(Storage):
    """The emulator's storage, refusing names GCS refuses where names arrive in bodies (bucket
    inserts, upload metadata); names in paths are checked before routing."""

    def create_bucket(self, bucket_name: str, bucket_obj: Any) -> Any:
        _require(bucket_name_problem(bucket_name))
        return super().create_bucket(bucket_name, bucket_obj)

    def create_file(self, bucket_name: str, file_name: str, *args: Any, **kwargs: Any) -> Any:
        _require(object_name_problem(file_name))
        return super().create_file(bucket_name, file_name, *args, **kwargs)

    def create_resumable_upload(self, bucket_name: str, file_name: str, file_obj: Any) -> Any:
        _require(object_name_problem(file_name))
        return super().create_resumable_upload(bucket_name, file_name, file_obj)


def path_name_problem(raw_path: str) -> str | None:
    """The bucket and object names a request names in its path (and ``?name=``), checked."""
    parts = urlsplit(raw_path)
    names: list[tuple[str, str]] = []
    for regex, _handlers in server.HANDLERS:
        match = re.fullmatch(regex, parts.path)
        if match:
            names += [(k, v) for k, v in match.groupdict().items() if v is not None]
            break
    names += [("object_id", v) for v in parse_qs(parts.query).get("name", [])]
    for key, raw in names:
        try:
            name = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            return f"{key} {raw!r} is not valid UTF-8 once percent-decoded"
        check = bucket_name_problem if key in BUCKET_PARAMS else object_name_problem
        problem = check(name) if key in BUCKET_PARAMS + OBJECT_PARAMS else None
        if problem:
            return problem
    return None


# -- the request path ----------------------------------------------------------------------------


class GuardedRequestHandler(server.RequestHandler):
    """The emulator's handler, with guard.py's checks and the name checks before routing."""

    def setup(self) -> None:
        super().setup()
        # Whose connection this is, once per connection (one handler serves all its keep-alive
        # requests): reading the kernel's socket table costs milliseconds, and gcsfs sends
        # hundreds of requests per checkpoint over a few connections.
        self.peer_refusal = peer_refusal(self.client_address[1], self.server.server_address[1])

    def _route(self, method: str) -> None:
        port = self.server.server_address[1]
        refusal = self.peer_refusal or origin_refusal(self.headers, port)  # type: ignore[arg-type]
        if refusal is None:
            problem = path_name_problem(self.path)
            if problem:
                refusal = Refusal(400, "INVALID_ARGUMENT", problem)
        if refusal is not None:
            self._answer(refusal)
            return
        try:
            server.Router(self).handle(method)
        except InvalidName as exc:
            self._answer(Refusal(400, "INVALID_ARGUMENT", str(exc)))
        except Exception as exc:  # the emulator's own failure: say so instead of hanging up
            log.exception("GCS emulator error on %s %s", method, self.path)
            self._answer(Refusal(500, "INTERNAL", f"GCS emulator error: {exc!r}"))

    def _answer(self, refusal: Refusal) -> None:
        body = json.dumps(error_body(refusal.http_code, refusal.message, refusal.status)).encode()
        self.close_connection = True  # an unread request body must not be read as a request
        self.send_response(refusal.http_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._route(server.GET)

    def do_POST(self) -> None:
        self._route(server.POST)

    def do_PUT(self) -> None:
        self._route(server.PUT)

    def do_DELETE(self) -> None:
        self._route(server.DELETE)

    def do_PATCH(self) -> None:
        self._route(server.PATCH)


def serve(host: str, port: int, in_memory: bool, project_number: str) -> None:
    install_routes()
    storage = CheckedStorage(
        use_memory_fs=in_memory, data_dir=os.getcwd(), project_number=project_number
    )
    # The emulator's own server class (http.server.HTTPServer: one request at a time, which
    # its storage relies on; SO_REUSEADDR on).
    httpd = server.server.HTTPServer((host, port), partial(GuardedRequestHandler, storage))
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="vtx local GCS emulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--in-memory", action="store_true", help="keep objects in memory only")
    parser.add_argument("--project-number", default=settings.DEFAULT_PROJECT_NUMBER)
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR if args.quiet else logging.INFO)
    serve(args.host, args.port, args.in_memory, args.project_number)


if __name__ == "__main__":
    main()
