"""The GCS JSON API's wire formats, as the local GCS reads and writes them: resources, page
tokens, list parameters, ``Range`` and ``Content-Range`` headers, multipart upload bodies.
Pure functions; a malformed input is a StoreError (a 400) saying which parameter or header."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jobs.core.gcs_names import object_name_problem
from jobs.local.storage.glob_match import GlobError, compile_glob
from jobs.local.storage.object_store import (
    LIST_MAX_RESULTS,
    ComposeSource,
    ListQuery,
    Preconditions,
    StoreError,
)

TOKEN_PREFIX = b"vtx-gcs:"
MULTIPART_HEAD_MAX = 1 << 20
"""The most a multipart upload's metadata part (JSON and part headers) may take."""
INT_FIELDS = ("generation", "metageneration", "size")
"""Kept as numbers on disk; int64 fields are strings in the JSON API."""
PRECONDITION_PARAMS = {
    "ifGenerationMatch": "if_generation_match",
    "ifGenerationNotMatch": "if_generation_not_match",
    "ifMetagenerationMatch": "if_metageneration_match",
    "ifMetagenerationNotMatch": "if_metageneration_not_match",
}
UPLOAD_PRECONDITION_PARAMS = PRECONDITION_PARAMS | {
    "ifMetaGenerationNotMatch": "if_metageneration_not_match",
}
"""Uploads also take the spelling google-cloud-storage sends for multipart and resumable uploads
(its blob.py writes ``ifMetaGenerationNotMatch`` there): a condition a client asked for is held,
whatever GCS does with that spelling (which we could not confirm)."""
SOURCE_PRECONDITION_PARAMS = {
    "ifSourceGenerationMatch": "if_generation_match",
    "ifSourceGenerationNotMatch": "if_generation_not_match",
    "ifSourceMetagenerationMatch": "if_metageneration_match",
    "ifSourceMetagenerationNotMatch": "if_metageneration_not_match",
}
"""copyTo, rewriteTo and moveTo: the same conditions, on the source object."""
MAX_COMPOSE_SOURCES = 32
INT64 = re.compile(r"-?[0-9]{1,19}")
"""An int64 as the JSON API writes one (a string) or reads one (a string or a number)."""


def bad_request(message: str) -> StoreError:
    return StoreError(400, "INVALID_ARGUMENT", message)


# -- resources -----------------------------------------------------------------------------------


def object_resource(meta: Mapping[str, Any], base_url: str) -> dict[str, Any]:
    """objects#resource from stored metadata; links point at this server (``base_url``)."""
    bucket, name, generation = meta["bucket"], meta["name"], meta["generation"]
    quoted = quote(name, safe="")
    resource: dict[str, Any] = {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/{generation}",
        "selfLink": f"{base_url}/storage/v1/b/{bucket}/o/{quoted}",
        "mediaLink": (
            f"{base_url}/download/storage/v1/b/{bucket}/o/{quoted}"
            f"?generation={generation}&alt=media"
        ),
        "storageClass": "STANDARD",
        "timeStorageClassUpdated": meta["timeCreated"],
        "etag": etag(meta),
    }
    for key, value in meta.items():
        resource[key] = str(value) if key in INT_FIELDS else value
    return resource


def bucket_resource(meta: Mapping[str, Any], base_url: str) -> dict[str, Any]:
    name = meta["name"]
    resource = {
        "kind": "storage#bucket",
        "id": name,
        "selfLink": f"{base_url}/storage/v1/b/{name}",
        "locationType": "region",
        "etag": base64.b64encode(f"{name}/{meta['metageneration']}".encode()).decode(),
    }
    return resource | {k: str(v) if k == "metageneration" else v for k, v in meta.items()}


def etag(meta: Mapping[str, Any]) -> str:
    return base64.b64encode(f"{meta['generation']}/{meta['metageneration']}".encode()).decode()


def error_document(error: StoreError) -> dict[str, Any]:
    return {"error": {"code": error.http_code, "message": error.message, "status": error.status}}


# -- parameters ----------------------------------------------------------------------------------


def int_param(query: Mapping[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    if not INT64.fullmatch(raw):
        raise bad_request(f"{key}={raw!r} is not an integer")
    return int(raw)


def int_field(value: Any, where: str) -> int | None:
    """An int64 field of a JSON body: a number or a string of digits (None: absent)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    if isinstance(value, str) and INT64.fullmatch(value):
        return int(value)
    raise bad_request(f"{where} is {value!r}, not an integer (an int64, as a number or a string)")


def preconditions(
    query: Mapping[str, str], params: Mapping[str, str] = PRECONDITION_PARAMS
) -> Preconditions:
    """The ``if(Meta)generation(Not)Match`` parameters of a request (``params``:
    SOURCE_PRECONDITION_PARAMS for those a copy puts on its source, UPLOAD_PRECONDITION_PARAMS
    for an upload's); two spellings of one condition must agree."""
    values: dict[str, int] = {}
    for key, attr in params.items():
        value = int_param(query, key)
        if value is None:
            continue
        if values.setdefault(attr, value) != value:
            raise bad_request(f"{key}={value} contradicts another spelling of the same condition")
    return Preconditions(**values)


def compose_sources(body: Mapping[str, Any]) -> list[ComposeSource]:
    """objects.compose's ``sourceObjects``: a name each, maybe a generation, maybe
    ``objectPreconditions.ifGenerationMatch`` (which, with a generation, must be the same)."""
    sources = body.get("sourceObjects")
    if not isinstance(sources, list) or not 1 <= len(sources) <= MAX_COMPOSE_SOURCES:
        raise bad_request(
            f'compose takes 1 to {MAX_COMPOSE_SOURCES} sourceObjects, each {{"name": ...}}'
        )
    parsed = []
    for at, source in enumerate(sources):
        where = f"sourceObjects[{at}]"
        if not isinstance(source, dict) or not isinstance(source.get("name"), str):
            raise bad_request(f'{where} needs {{"name": "..."}}')
        problem = object_name_problem(source["name"])
        if problem:
            raise bad_request(f"{where}: {problem}")
        generation = int_field(source.get("generation"), f"{where}.generation")
        conditions = source.get("objectPreconditions") or {}
        if not isinstance(conditions, dict):
            raise bad_request(f'{where}.objectPreconditions must be {{"ifGenerationMatch": N}}')
        match = int_field(
            conditions.get("ifGenerationMatch"), f"{where}.objectPreconditions.ifGenerationMatch"
        )
        if generation is not None and match is not None and generation != match:
            raise bad_request(
                f"{where}: generation {generation} and objectPreconditions.ifGenerationMatch "
                f"{match} differ; give one, or the same value in both"
            )
        parsed.append(
            ComposeSource(source["name"], generation, Preconditions(if_generation_match=match))
        )
    return parsed


def encode_page_token(name: str) -> str:
    return base64.urlsafe_b64encode(TOKEN_PREFIX + name.encode()).decode()


def decode_page_token(token: str) -> str:
    """The name a page starts at; a 400 for anything this server did not hand out."""
    try:
        raw = base64.urlsafe_b64decode(token.encode("ascii"))
        if not raw.startswith(TOKEN_PREFIX):
            raise ValueError(token)
        name = raw[len(TOKEN_PREFIX) :].decode("utf-8")
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise bad_request(
            f"pageToken {token!r} is not one this server returned; pass nextPageToken from the "
            f"previous page unchanged"
        ) from exc
    if object_name_problem(name):
        raise bad_request(f"pageToken {token!r} is not one this server returned")
    return name


def max_results(query: Mapping[str, str]) -> int:
    given = query.get("maxResults")
    if given is None or given == "":
        return LIST_MAX_RESULTS
    if not given.isdigit() or not given.isascii() or int(given) < 1:
        raise bad_request(f"maxResults={given!r} must be a positive integer")
    return min(int(given), LIST_MAX_RESULTS)


def list_query(query: Mapping[str, str]) -> ListQuery:
    """objects.list's parameters, checked."""
    glob = None
    if "matchGlob" in query:
        try:
            glob = compile_glob(query["matchGlob"])
        except GlobError as exc:
            raise bad_request(str(exc)) from exc
    token = query.get("pageToken")
    start = max(query.get("startOffset", ""), decode_page_token(token) if token else "")
    return ListQuery(
        prefix=query.get("prefix", ""),
        delimiter=query.get("delimiter", ""),
        start=start,
        end=query.get("endOffset") or None,
        max_results=max_results(query),
        glob=glob,
        include_trailing_delimiter=query.get("includeTrailingDelimiter") == "true",
    )


# -- byte ranges ---------------------------------------------------------------------------------

CONTENT_RANGE = re.compile(r"bytes (?:(\d{1,19})-(\d{1,19})|\*)/(\d{1,19}|\*)")
RANGE = re.compile(r"bytes=(\d{0,19})-(\d{0,19})")


@dataclass(frozen=True)
class ChunkRange:
    """A resumable upload request's ``Content-Range``: the bytes it carries (none for a status
    query, ``bytes */N``) and the total size once the client knows it."""

    first: int | None
    last: int | None
    total: int | None


def chunk_range(header: str | None, length: int) -> ChunkRange:
    if header is None:
        if length:
            raise bad_request(
                "a resumable upload chunk needs a Content-Range header "
                "(bytes FIRST-LAST/TOTAL, or bytes FIRST-LAST/* before the last chunk)"
            )
        return ChunkRange(None, None, None)
    match = CONTENT_RANGE.fullmatch(header.strip())
    if match is None:
        raise bad_request(
            f"Content-Range {header!r} is not bytes FIRST-LAST/TOTAL, bytes FIRST-LAST/* or "
            f"bytes */TOTAL"
        )
    first, last, total_text = match.groups()
    total = None if total_text == "*" else int(total_text)
    if first is None:
        if length:
            raise bad_request(f"Content-Range {header!r} names no bytes, but {length} were sent")
        return ChunkRange(None, None, total)
    first_n, last_n = int(first), int(last)
    if last_n < first_n:
        raise bad_request(f"Content-Range {header!r} ends before it starts")
    if last_n - first_n + 1 != length:
        raise bad_request(
            f"Content-Range {header!r} names {last_n - first_n + 1} bytes, but the request "
            f"carries {length}"
        )
    if total is not None and last_n >= total:
        raise bad_request(f"Content-Range {header!r} runs past its total of {total} bytes")
    return ChunkRange(first_n, last_n, total)


def download_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=A-B`` as (start, end exclusive); None for the whole object (no header,
    or one this server does not serve partially, such as several ranges); 416 past the end."""
    if not header:
        return None
    match = RANGE.fullmatch(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":  # the last N bytes
        start, end = max(0, size - int(last)), size
    else:
        start = int(first)
        end = size if last == "" else min(int(last) + 1, size)
    if start >= size or end <= start:
        if size == 0 and start == 0:
            return None
        raise StoreError(
            416, "OUT_OF_RANGE", f"Range {header!r} is outside the object's {size} bytes"
        )
    return start, end


# -- multipart uploads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Multipart:
    metadata: dict[str, Any]
    content_type: str | None
    start: int
    end: int
    """The media part's bytes within the body file: [start, end)."""


def boundary_of(content_type: str) -> bytes:
    match = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', content_type)
    if not content_type.lower().startswith("multipart/related") or match is None:
        raise bad_request(
            f"a multipart upload needs Content-Type: multipart/related; boundary=..., not "
            f"{content_type!r}"
        )
    return (match.group(1) or match.group(2)).encode()


def _part_headers(block: bytes) -> dict[str, str]:
    headers = {}
    for line in block.decode("latin-1").splitlines():
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return headers


def _headers_end(data: bytes, start: int) -> tuple[int, int]:
    """Where a part's headers end and its body starts (``\\r\\n\\r\\n``, or ``\\n\\n`` as gcsfs
    writes)."""
    found = [(at, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (at := data.find(sep, start)) >= 0]
    if not found:
        raise bad_request("multipart upload: a part's headers have no end (a blank line)")
    at, width = min(found)
    return at, at + width


def parse_multipart(body: Path, size: int, boundary: bytes) -> Multipart:
    """The metadata part and where the media part lies in ``body`` (two parts, as GCS takes:
    JSON metadata, then the object's bytes)."""
    delimiter = b"--" + boundary
    with body.open("rb") as src:
        head = src.read(min(size, MULTIPART_HEAD_MAX))
        src.seek(max(0, size - len(delimiter) - 64))
        tail_at = src.tell()
        tail = src.read()
    first = head.find(delimiter)
    if first < 0:
        raise bad_request("multipart upload: the body does not start with its boundary")
    _, json_start = _headers_end(head, first)
    json_end = head.find(delimiter, json_start)
    if json_end < 0:
        raise bad_request(
            f"multipart upload: the metadata part is not followed by a second part within "
            f"{MULTIPART_HEAD_MAX} bytes"
        )
    try:
        metadata = json.loads(head[json_start:json_end].strip() or b"{}")
    except ValueError as exc:
        raise bad_request(f"multipart upload: the metadata part is not JSON ({exc})") from exc
    if not isinstance(metadata, dict):
        raise bad_request("multipart upload: the metadata part is not a JSON object")
    headers_end, media_start = _headers_end(head, json_end + len(delimiter))
    media_headers = _part_headers(head[json_end + len(delimiter) : headers_end])
    closing = tail.rfind(delimiter + b"--")
    if closing < 0:
        raise bad_request("multipart upload: the body does not end with its closing boundary")
    media_end = tail_at + closing
    if media_end < media_start:
        raise bad_request("multipart upload: the media part overlaps its closing boundary")
    for newline in (b"\r\n", b"\n"):  # the line break before a boundary belongs to it
        if media_end - len(newline) >= media_start and tail[:closing].endswith(newline):
            media_end -= len(newline)
            break
    return Multipart(metadata, media_headers.get("content-type"), media_start, media_end)
