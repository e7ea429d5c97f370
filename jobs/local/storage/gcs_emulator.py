"""The local platform's GCS: the JSON API that google-cloud-storage, gcsfs and `vtx` speak,
over objects kept by jobs/local/storage/object_store.py.

`python -m jobs.local.storage.gcs_emulator --host 127.0.0.1 --port N [--in-memory] [-q]`;
objects kept under ``./.cloudstorage/v2`` of the working directory (``--in-memory``: in a
temporary directory there, removed on exit).

Served: buckets insert/get/list/patch/delete (a bucket with objects or unfinished resumable
uploads is a 409, as in GCS); objects get/list/patch/update/delete, copyTo, rewriteTo,
compose and moveTo (gcsfs's ``mv``, which torch.distributed.checkpoint calls on every save;
without it gcsfs retries for about 31 s before falling back to copy + delete); downloads
with ``Range``, ``X-Goog-Hash`` for the client's checksum check; uploads of every type the
clients send: ``media``, ``multipart`` (``\\r\\n`` or gcsfs's bare ``\\n`` line breaks) and
``resumable`` (chunks by PUT or gcsfs's POST, ``Content-Range`` status queries, cancel). Not
served: the XML API, batch requests (gcsfs sends none to an emulator), object versioning
(``versions=true`` lists the live objects; ``softDeleted=true`` lists none), ACLs, HMAC keys,
notifications.

Why it is written here rather than taken from PyPI: gcp-storage-emulator (used until now) maps
object names to file paths, so distinct names landed on one file, and it served one
connection at a time; fake-gcs-server (a Go binary) listens on a TCP port of its own that no
check of ours can stand in front of. The comparison, case by case, is in
jobs/local/README.md ("The GCS emulator").

Each connection has a thread; every read from a client has a deadline (``--read-timeout-s``, the
platform's ``read_timeout_s``: jobs/local/plumbing/request_deadline.py), so a client that stops
mid-request, or never starts one, holds only its own thread; a client that goes away is one line
in the log. Before anything
is read, the connection's owner is checked (jobs/local/plumbing/guard.py): a program of
another user gets a 403 at once, without a request. Every request then passes the same
checks as the control plane's (loopback ``Host``, no browser headers) and GCS's naming rules.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from jobs.core.gcs_names import bucket_name_problem, object_name_problem
from jobs.local.platform.settings import READ_TIMEOUT_S
from jobs.local.plumbing.guard import (
    MAX_BODY_BYTES,
    Refusal,
    error_body,
    origin_refusal,
    peer_refusal,
)
from jobs.local.plumbing.request_deadline import ClientGone, log_client_gone
from jobs.local.storage import json_api
from jobs.local.storage.json_api import bad_request, object_resource
from jobs.local.storage.object_store import (
    COPY_CHUNK,
    OBJECT_FIELDS,
    ObjectStore,
    Preconditions,
    Session,
    StoreError,
)

log = logging.getLogger(__name__)

STORE_DIR = Path(".cloudstorage") / "v2"
DEFAULT_PROJECT_NUMBER = "123456789"
REFUSAL_DRAIN_S = 1.0
"""How long a refused connection is read from after its 403, so that closing it does not reset
the connection before the client has read the answer."""
MAX_QUERY_FIELDS = 64


def _name_from_path(raw: str, what: str) -> str:
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError as exc:
        raise bad_request(f"{what} {raw!r} is not valid UTF-8 once percent-decoded") from exc


def checked_bucket(raw: str) -> str:
    name = _name_from_path(raw, "bucket name")
    problem = bucket_name_problem(name)
    if problem:
        raise bad_request(problem)
    return name


def checked_object(name: str) -> str:
    problem = object_name_problem(name)
    if problem:
        raise bad_request(problem)
    return name


BUCKET = r"(?P<bucket>[^/]+)"
OBJECT_ROUTES = (
    ("copy", re.compile(r"(?P<object>.+?)/copyTo/b/(?P<dest_bucket>[^/]+)/o/(?P<dest>.+)")),
    ("rewrite", re.compile(r"(?P<object>.+?)/rewriteTo/b/(?P<dest_bucket>[^/]+)/o/(?P<dest>.+)")),
    ("move", re.compile(r"(?P<object>.+?)/moveTo/o/(?P<dest>.+)")),
    ("compose", re.compile(r"(?P<object>.+)/compose")),
)


class GcsServer(ThreadingHTTPServer):
    """One thread per connection (daemon threads: a stuck client never delays shutdown)."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], store: ObjectStore, read_timeout_s: float = READ_TIMEOUT_S
    ) -> None:
        self.store = store
        self.read_timeout_s = read_timeout_s
        super().__init__(address, GcsHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away outside a request's handling (while its request line was
        read, or an answer written) is one line; anything else keeps its traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            log_client_gone(log, "-", "-", f"{client_address[0]}:{client_address[1]}: {error!r}")
            return
        super().handle_error(request, client_address)


class GcsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GcsServer

    def setup(self) -> None:
        self.timeout = self.server.read_timeout_s  # set on the socket: every read's deadline
        super().setup()

    # -- the connection -------------------------------------------------------------------------

    def handle(self) -> None:
        refusal = peer_refusal(self.client_address[1], self.server.server_address[1])
        if refusal is not None:
            self._refuse_connection(refusal)
            return
        super().handle()

    def _refuse_connection(self, refusal: Refusal) -> None:
        """A 403 before any request is read; then what the client sent is read and dropped
        for at most REFUSAL_DRAIN_S, so that closing does not reset the connection under the
        answer."""
        body = json.dumps(error_body(refusal.http_code, refusal.message, refusal.status)).encode()
        reason = HTTPStatus(refusal.http_code).phrase
        head = (
            f"HTTP/1.1 {refusal.http_code} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        sock = self.connection
        deadline = time.monotonic() + REFUSAL_DRAIN_S
        try:
            sock.settimeout(REFUSAL_DRAIN_S)
            sock.sendall(head.encode() + body)
            sock.shutdown(socket.SHUT_WR)
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                if not sock.recv(1 << 16):
                    break
        except OSError:
            pass
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    # -- one request ----------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        self._responded = False
        self._body_read = False
        try:
            refusal = origin_refusal(self.headers, self.server.server_address[1])  # type: ignore[arg-type]
            if refusal is not None:
                raise StoreError(refusal.http_code, refusal.status, refusal.message)
            self._route(method)
        except ClientGone as gone:
            log_client_gone(log, method, self.path, gone)
            self.close_connection = True
        except (ConnectionError, TimeoutError) as exc:  # gone while its answer was written
            log_client_gone(log, method, self.path, repr(exc))
            self.close_connection = True
        except StoreError as err:
            self._send_error(err)
        except Exception as exc:  # our own failure: say so instead of hanging up
            log.exception("local GCS error on %s %s", method, self.path)
            self._send_error(StoreError(500, "INTERNAL", f"local GCS error: {exc!r}"))
        finally:
            if not self._body_read:
                self.close_connection = True  # an unread body must not be read as a request

    def _send_error(self, err: StoreError) -> None:
        if self._responded:  # mid-download: nothing can be said any more
            self.close_connection = True
            return
        self._send_json(err.http_code, json_api.error_document(err))

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self._responded = True
        reason = "Client Closed Request" if status == 499 else None
        self.send_response(status, reason)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        if not self._body_read:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, document: Any, **headers: str) -> None:
        self._send(
            status, json.dumps(document).encode(), "application/json; charset=UTF-8", **headers
        )

    def _send_empty(self, status: int, **headers: str) -> None:
        self._send(status, b"", "text/plain", **headers)

    @property
    def base_url(self) -> str:
        # origin_refusal has checked Host: the loopback address and this server's port.
        return f"http://{self.headers['host']}"

    # -- request bodies -------------------------------------------------------------------------

    def _body_length(self) -> int | None:
        """The declared body length; None for a chunked body."""
        encoding = self.headers.get("transfer-encoding")
        if encoding is not None:
            if encoding.strip().lower() != "chunked":
                raise StoreError(501, "UNIMPLEMENTED", f"Transfer-Encoding {encoding!r}")
            return None
        length = self.headers.get("content-length", "0")
        if not length.isdigit() or not length.isascii():
            raise bad_request(f"Content-Length {length!r} is not a number")
        return int(length)

    def _read_exact(self, count: int) -> bytes:
        try:
            data = self.rfile.read(count)
        except OSError as exc:
            raise ClientGone(f"reading its body: {exc!r}") from exc
        if len(data) < count:
            raise ClientGone(f"it closed the connection {count - len(data)} bytes short")
        return data

    def _chunks(self, length: int | None) -> Any:
        """The body in pieces of at most COPY_CHUNK bytes, ``length`` long or chunked."""
        if length is not None:
            while length > 0:
                piece = self._read_exact(min(length, COPY_CHUNK))
                length -= len(piece)
                yield piece
        else:
            while True:
                line = self._read_line()
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError as exc:
                    raise bad_request(f"chunked body: bad chunk size {line[:20]!r}") from exc
                if size == 0:
                    while self._read_line().strip():  # trailers
                        pass
                    break
                while size > 0:
                    piece = self._read_exact(min(size, COPY_CHUNK))
                    size -= len(piece)
                    yield piece
                self._read_exact(2)
        self._body_read = True

    def _read_line(self) -> bytes:
        try:
            line = self.rfile.readline(1024)
        except OSError as exc:
            raise ClientGone(f"reading its chunked body: {exc!r}") from exc
        if not line.endswith(b"\n"):
            raise ClientGone("its chunked body ended mid-line")
        return line

    def _body_to(self, out: IO[bytes]) -> int:
        written = 0
        for piece in self._chunks(self._body_length()):
            out.write(piece)
            written += len(piece)
        return written

    def _body_to_temp(self) -> tuple[Path, int]:
        path = self.server.store.temp_file()
        try:
            with path.open("wb") as out:
                return path, self._body_to(out)
        except BaseException:
            path.unlink(missing_ok=True)
            raise

    def _json_body(self) -> dict[str, Any]:
        length = self._body_length()
        if length is not None and length > MAX_BODY_BYTES:
            raise StoreError(
                413, "INVALID_ARGUMENT", f"a JSON body of {length} bytes is over {MAX_BODY_BYTES}"
            )
        data = b""
        for piece in self._chunks(length):
            data += piece
            if len(data) > MAX_BODY_BYTES:
                raise StoreError(
                    413, "INVALID_ARGUMENT", f"a JSON body over {MAX_BODY_BYTES} bytes"
                )
        if not data.strip():
            return {}
        try:
            document = json.loads(data)
        except ValueError as exc:
            raise bad_request(f"the request body is not JSON ({exc})") from exc
        if not isinstance(document, dict):
            raise bad_request("the request body must be a JSON object")
        return document

    def _discard_body(self) -> None:
        for _ in self._chunks(self._body_length()):
            pass

    # -- routing --------------------------------------------------------------------------------

    def _query(self, raw: str) -> dict[str, str]:
        try:
            pairs = parse_qsl(
                raw, keep_blank_values=True, errors="strict", max_num_fields=MAX_QUERY_FIELDS
            )
        except (UnicodeDecodeError, ValueError) as exc:
            raise bad_request(
                f"the query string is not valid UTF-8 key=value pairs ({exc})"
            ) from exc
        return dict(pairs)

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, self._query(parts.query)
        for prefix in ("/storage/v1", "/upload/storage/v1", "/download/storage/v1"):
            if path == prefix or path.startswith(prefix + "/"):
                rest = path[len(prefix) :]
                break
        else:
            if path.startswith("/batch/"):
                raise StoreError(501, "UNIMPLEMENTED", "the local GCS serves no batch requests")
            raise not_served(method, path)
        if prefix == "/upload/storage/v1":
            match = re.fullmatch(rf"/b/{BUCKET}/o", rest)
            if match is None:
                raise not_served(method, path)
            self._upload(method, checked_bucket(match["bucket"]), query)
            return
        if prefix == "/download/storage/v1":
            match = re.fullmatch(rf"/b/{BUCKET}/o/(?P<object>.+)", rest)
            if match is None or method != "GET":
                raise not_served(method, path)
            bucket = checked_bucket(match["bucket"])
            self._download(
                bucket, checked_object(_name_from_path(match["object"], "object")), query
            )
            return
        self._json_api(method, rest, query)

    def _json_api(self, method: str, rest: str, query: dict[str, str]) -> None:
        if rest == "/b":
            if method == "GET":
                self._list_buckets(query)
            elif method == "POST":
                self._insert_bucket()
            else:
                raise not_served(method, rest)
            return
        match = re.fullmatch(rf"/b/{BUCKET}(?P<tail>/o(?P<object>/.*)?)?", rest)
        if match is None:
            raise not_served(method, rest)
        bucket = checked_bucket(match["bucket"])
        if match["tail"] is None:
            self._bucket(method, bucket)
        elif match["object"] is None:
            if method != "GET":
                raise not_served(method, rest)
            self._list_objects(bucket, query)
        else:
            self._object(method, bucket, match["object"][1:], query)

    # -- buckets --------------------------------------------------------------------------------

    def _list_buckets(self, query: dict[str, str]) -> None:
        json_api.max_results(query)
        self._discard_body()
        items = self.server.store.list_buckets(query.get("prefix", ""))
        document: dict[str, Any] = {"kind": "storage#buckets"}
        if items:
            document["items"] = [json_api.bucket_resource(b, self.base_url) for b in items]
        self._send_json(200, document)

    def _insert_bucket(self) -> None:
        fields = self._json_body()
        name = fields.get("name")
        if not isinstance(name, str):
            raise bad_request('a new bucket needs {"name": "..."} in the request body')
        problem = bucket_name_problem(name)
        if problem:
            raise bad_request(problem)
        created = self.server.store.create_bucket(name, fields)
        self._send_json(200, json_api.bucket_resource(created, self.base_url))

    def _bucket(self, method: str, bucket: str) -> None:
        store = self.server.store
        if method == "GET":
            self._discard_body()
            self._send_json(200, json_api.bucket_resource(store.get_bucket(bucket), self.base_url))
        elif method == "DELETE":
            self._discard_body()
            store.delete_bucket(bucket)
            self._send_empty(204)
        elif method in ("PATCH", "PUT"):
            patched = store.patch_bucket(bucket, self._json_body())
            self._send_json(200, json_api.bucket_resource(patched, self.base_url))
        else:
            raise not_served(method, f"/b/{bucket}")

    # -- objects --------------------------------------------------------------------------------

    def _list_objects(self, bucket: str, query: dict[str, str]) -> None:
        self._discard_body()
        list_query = json_api.list_query(query)
        document: dict[str, Any] = {"kind": "storage#objects"}
        if query.get("softDeleted") == "true":  # nothing is kept once deleted
            self.server.store.get_bucket(bucket)
            self._send_json(200, document)
            return
        page = self.server.store.list(bucket, list_query)
        if page.items:
            document["items"] = [object_resource(m, self.base_url) for m in page.items]
        if page.prefixes:
            document["prefixes"] = page.prefixes
        if page.next_start is not None:
            document["nextPageToken"] = json_api.encode_page_token(page.next_start)
        self._send_json(200, document)

    def _object(self, method: str, bucket: str, raw: str, query: dict[str, str]) -> None:
        if method == "POST":
            for action, pattern in OBJECT_ROUTES:
                match = pattern.fullmatch(raw)
                if match is not None:
                    self._object_action(action, bucket, match.groupdict(), query)
                    return
            raise not_served(method, raw)
        name = checked_object(_name_from_path(raw, "object name"))
        store = self.server.store
        generation = json_api.int_param(query, "generation")
        if method == "GET":
            if query.get("alt") == "media":
                self._download(bucket, name, query)
                return
            self._discard_body()
            meta = store.get(bucket, name, generation)
            json_api.preconditions(query).check(meta)
            self._send_json(200, object_resource(meta, self.base_url))
        elif method in ("PATCH", "PUT"):
            fields = self._json_body()
            conditions = json_api.preconditions(query)
            meta = store.patch(bucket, name, fields, conditions, method == "PUT", generation)
            self._send_json(200, object_resource(meta, self.base_url))
        elif method == "DELETE":
            self._discard_body()
            store.delete(bucket, name, generation, json_api.preconditions(query))
            self._send_empty(204)
        else:
            raise not_served(method, raw)

    def _object_action(
        self, action: str, bucket: str, names: dict[str, str], query: dict[str, str]
    ) -> None:
        store = self.server.store
        source = checked_object(_name_from_path(names["object"], "object name"))
        body = self._json_body()
        conditions = json_api.preconditions(query)
        if action == "compose":
            self._compose(bucket, source, body, conditions)
            return
        dest_bucket = checked_bucket(names["dest_bucket"]) if names.get("dest_bucket") else bucket
        dest = checked_object(_name_from_path(names["dest"], "destination object name"))
        if action == "move" and dest == source:
            raise bad_request("objects.move: the destination is the source; name another object")
        source_generation = json_api.int_param(query, "sourceGeneration")
        source_meta = store.get(bucket, source, source_generation)
        source_conditions = json_api.preconditions(query, json_api.SOURCE_PRECONDITION_PARAMS)
        source_conditions.check(source_meta, f"the source gs://{bucket}/{source}")
        fields = {k: v for k, v in source_meta.items() if k in OBJECT_FIELDS} | {
            k: v for k, v in body.items() if k in OBJECT_FIELDS
        }
        data = store.copy_data(bucket, source, source_meta["generation"])
        copied = store.put(dest_bucket, dest, data, fields, conditions)
        if action == "move":
            moved_from = Preconditions(if_generation_match=source_meta["generation"])
            store.delete(bucket, source, preconditions=moved_from)
        resource = object_resource(copied, self.base_url)
        if action == "rewrite":
            size = resource["size"]
            resource = {
                "kind": "storage#rewriteResponse",
                "totalBytesRewritten": size,
                "objectSize": size,
                "done": True,
                "resource": resource,
            }
        self._send_json(200, resource)

    def _compose(
        self, bucket: str, dest: str, body: dict[str, Any], conditions: Preconditions
    ) -> None:
        sources = json_api.compose_sources(body)
        destination = body.get("destination") or {}
        if not isinstance(destination, dict):
            raise bad_request("compose's destination must be an object resource ({...})")
        data = self.server.store.compose(bucket, sources)
        meta = self.server.store.put(bucket, dest, data, destination, conditions)
        self._send_json(200, object_resource(meta, self.base_url))

    # -- downloads ------------------------------------------------------------------------------

    def _download(self, bucket: str, name: str, query: dict[str, str]) -> None:
        self._discard_body()
        generation = json_api.int_param(query, "generation")
        with self.server.store.open(bucket, name, generation) as (meta, data):
            json_api.preconditions(query).check(meta)
            size = meta["size"]
            span = json_api.download_range(self.headers.get("range"), size)
            start, end = span or (0, size)
            headers = {
                "Accept-Ranges": "bytes",
                "ETag": json_api.etag(meta),
                "X-Goog-Generation": str(meta["generation"]),
                "X-Goog-Metageneration": str(meta["metageneration"]),
                "X-Goog-Hash": f"crc32c={meta['crc32c']},md5={meta['md5Hash']}",
                "X-Goog-Stored-Content-Length": str(size),
                "X-Goog-Stored-Content-Encoding": meta.get("contentEncoding") or "identity",
            }
            for field, header in (
                ("contentEncoding", "Content-Encoding"),
                ("contentDisposition", "Content-Disposition"),
                ("cacheControl", "Cache-Control"),
                ("contentLanguage", "Content-Language"),
            ):
                if meta.get(field):
                    headers[header] = meta[field]
            if span is not None:
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            self._responded = True
            self.send_response(206 if span else 200)
            self.send_header("Content-Type", meta["contentType"])
            self.send_header("Content-Length", str(end - start))
            for header, value in headers.items():
                self.send_header(header, value)
            self.end_headers()
            data.seek(start)
            left = end - start
            while left > 0:
                piece = data.read(min(left, COPY_CHUNK))
                if not piece:
                    raise RuntimeError(f"gs://{bucket}/{name}: data file shorter than its size")
                self.wfile.write(piece)
                left -= len(piece)

    # -- uploads --------------------------------------------------------------------------------

    def _upload(self, method: str, bucket: str, query: dict[str, str]) -> None:
        if "upload_id" in query:
            session = self.server.store.session(query["upload_id"])
            if session.bucket != bucket:
                raise json_api.bad_request("upload_id belongs to another bucket")
            if method in ("PUT", "POST"):
                self._upload_chunk(session)
            elif method == "DELETE":
                self._discard_body()
                with session.lock:  # not under a chunk being written
                    self.server.store.cancel_session(session)
                self._send_empty(499)
            else:
                raise not_served(method, "a resumable upload")
            return
        if method != "POST":
            raise not_served(method, f"/upload/storage/v1/b/{bucket}/o")
        upload_type = query.get("uploadType", "")
        content_type = self.headers.get("content-type", "")
        if upload_type == "resumable":
            self._start_resumable(bucket, query)
        elif upload_type == "multipart" or (
            not upload_type and content_type.lower().startswith("multipart/")
        ):
            self._upload_multipart(bucket, query, content_type)
        elif upload_type in ("media", ""):
            self._upload_media(bucket, query, content_type)
        else:
            raise bad_request(
                f"uploadType={upload_type!r}: the local GCS takes media, multipart or resumable"
            )

    def _name_param(self, query: dict[str, str], metadata: dict[str, Any]) -> str:
        name = metadata.get("name") or query.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request("an upload needs the object's name (?name=... or in its metadata)")
        return checked_object(name)

    def _upload_media(self, bucket: str, query: dict[str, str], content_type: str) -> None:
        name = self._name_param(query, {})
        self.server.store.get_bucket(bucket)
        data, _ = self._body_to_temp()
        fields = {"contentType": content_type} if content_type else {}
        meta = self.server.store.put(bucket, name, data, fields, upload_preconditions(query))
        self._send_json(200, object_resource(meta, self.base_url))

    def _upload_multipart(self, bucket: str, query: dict[str, str], content_type: str) -> None:
        boundary = json_api.boundary_of(content_type)
        store = self.server.store
        store.get_bucket(bucket)
        body, size = self._body_to_temp()
        try:
            parsed = json_api.parse_multipart(body, size, boundary)
            name = self._name_param(query, parsed.metadata)
            data = store.temp_file()
            with body.open("rb") as src, data.open("wb") as out:
                src.seek(parsed.start)
                left = parsed.end - parsed.start
                while left > 0:
                    piece = src.read(min(left, COPY_CHUNK))
                    out.write(piece)
                    left -= len(piece)
        finally:
            body.unlink(missing_ok=True)
        fields = dict(parsed.metadata)
        if parsed.content_type and not fields.get("contentType"):
            fields["contentType"] = parsed.content_type
        meta = store.put(bucket, name, data, fields, upload_preconditions(query))
        self._send_json(200, object_resource(meta, self.base_url))

    def _start_resumable(self, bucket: str, query: dict[str, str]) -> None:
        fields = self._json_body()
        name = self._name_param(query, fields)
        content_type = self.headers.get("x-upload-content-type")
        if content_type and not fields.get("contentType"):
            fields["contentType"] = content_type
        session = self.server.store.start_session(bucket, name, fields, upload_preconditions(query))
        location = (
            f"{self.base_url}/upload/storage/v1/b/{bucket}/o?uploadType=resumable"
            f"&name={quote(name, safe='')}&upload_id={session.id}"
        )
        self._send_empty(200, Location=location)

    def _upload_chunk(self, session: Session) -> None:
        length = self._body_length()
        if length is None:
            raise bad_request("a resumable upload chunk needs a Content-Length")
        chunk = json_api.chunk_range(self.headers.get("content-range"), length)
        with session.lock:
            if session.result is not None:
                self._discard_body()
                self._send_json(200, object_resource(session.result, self.base_url))
                return
            if chunk.first is not None:
                self._append(session, chunk.first, length)
            else:
                self._discard_body()
            total = chunk.total
            if total is not None and session.received > total:
                raise bad_request(
                    f"Content-Range total {total} is less than the {session.received} bytes "
                    f"already uploaded"
                )
            if total is not None and session.received == total:
                meta = self.server.store.finish_session(session)
                self._send_json(200, object_resource(meta, self.base_url))
                return
        headers = {"Range": f"bytes=0-{session.received - 1}"} if session.received else {}
        self._send_empty(308, **headers)

    def _append(self, session: Session, first: int, length: int) -> None:
        """Add a chunk's bytes to the session; bytes it already has are skipped (a client
        resending after a lost answer). A chunk cut short adds nothing."""
        if first > session.received:
            raise bad_request(
                f"the chunk starts at byte {first}, but {session.received} bytes have arrived; "
                f"send from byte {session.received} (ask with Content-Range: bytes */*)"
            )
        skip = session.received - first
        with session.path.open("r+b") as out:
            out.seek(session.received)
            try:
                for piece in self._chunks(length):
                    if skip >= len(piece):
                        skip -= len(piece)
                        continue
                    out.write(piece[skip:])
                    skip = 0
            except BaseException:
                out.truncate(session.received)
                raise
            session.received = out.tell()


def upload_preconditions(query: dict[str, str]) -> Preconditions:
    return json_api.preconditions(query, json_api.UPLOAD_PRECONDITION_PARAMS)


def not_served(method: str, path: str) -> StoreError:
    return StoreError(404, "NOT_FOUND", f"the local GCS serves no {method} {path}")


def serve(
    host: str, port: int, root: Path, project_number: str, read_timeout_s: float = READ_TIMEOUT_S
) -> None:
    httpd = GcsServer((host, port), ObjectStore(root, project_number), read_timeout_s)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="vtx local GCS emulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="keep nothing after exit (objects in a temporary directory, removed on exit)",
    )
    parser.add_argument("--project-number", default=DEFAULT_PROJECT_NUMBER)
    parser.add_argument(
        "--read-timeout-s",
        type=float,
        default=READ_TIMEOUT_S,
        help="longest wait for a client's next bytes before its connection is closed",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR if args.quiet else logging.INFO)
    signal.signal(signal.SIGTERM, _stop)
    root = Path(tempfile.mkdtemp(prefix=".cloudstorage-", dir=".")) if args.in_memory else STORE_DIR
    try:
        serve(args.host, args.port, root.resolve(), args.project_number, args.read_timeout_s)
    finally:
        if args.in_memory:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
