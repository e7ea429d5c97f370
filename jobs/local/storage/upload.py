"""`vtx local upload PATH gs://BUCKET/PREFIX`: a file or a directory tree into the local
platform's GCS emulator, where jobs read their data.

Where things land (said in `vtx local upload --help`, chosen to read like `gcloud storage`):
- a file to ``gs://b/prefix/`` (trailing slash) or ``gs://b``: ``prefix/FILE_NAME``;
- a file to ``gs://b/name`` (no trailing slash): exactly ``name``, as `gcloud storage cp` does;
- a directory to ``gs://b/prefix``: each file under it at ``prefix/RELATIVE/PATH``, as
  `gcloud storage rsync DIR gs://b/prefix` does (the directory's own name is not repeated).
Existing objects are overwritten. A missing bucket is an error naming it (as gsutil), unless
the caller asks to create it. Plain JSON-API calls over urllib, as `vtx local up` makes: the
emulator speaks exactly these, and `vtx` stays quick to start (no google-cloud-storage import).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from jobs.core.gcs_names import object_name_problem, split_gs_uri
from jobs.local.platform.state import LOCAL_BUCKETS, LOCAL_PROJECT

TIMEOUT_S = 60.0
"""Per request; a single upload to the emulator on loopback takes milliseconds per MiB."""


class UploadError(Exception):
    """What could not be uploaded, and what to do instead."""


@dataclass(frozen=True)
class GcsUri:
    bucket: str
    name: str
    """The object name or prefix after the bucket ('' for the bucket's root)."""

    @classmethod
    def parse(cls, uri: str) -> GcsUri:
        try:
            return cls(*split_gs_uri(uri, "gs://BUCKET[/PREFIX]"))
        except ValueError as exc:
            raise UploadError(str(exc)) from None

    def __str__(self) -> str:
        return f"gs://{self.bucket}/{self.name}"


@dataclass(frozen=True)
class Upload:
    """One file and the object it becomes."""

    source: Path
    target: GcsUri
    size: int


def _files_under(root: Path) -> Iterator[Path]:
    """Regular files under ``root``, in a stable order; symlinks to directories are not
    followed (a link loop would never end)."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path


def plan(source: Path, destination: str) -> list[Upload]:
    """Every file to upload and where it lands (rules in the module docstring); UploadError for
    a missing source, an empty directory or a name GCS refuses, before anything is sent."""
    dest = GcsUri.parse(destination)
    if source.is_file():
        name = dest.name + source.name if dest.name.endswith("/") or not dest.name else dest.name
        uploads = [Upload(source, GcsUri(dest.bucket, name), source.stat().st_size)]
    elif source.is_dir():
        prefix = dest.name.rstrip("/")
        uploads = [
            Upload(
                path,
                GcsUri(
                    dest.bucket, "/".join(filter(None, [prefix, *path.relative_to(source).parts]))
                ),
                path.stat().st_size,
            )
            for path in _files_under(source)
        ]
        if not uploads:
            raise UploadError(f"{source} holds no files: nothing to upload")
    else:
        raise UploadError(f"{source}: no such file or directory")
    for item in uploads:
        problem = object_name_problem(item.target.name)
        if problem:
            raise UploadError(f"{item.source} -> {item.target}: {problem}")
    return uploads


def _request(url: str, what: str, data: bytes | None = None, **headers: str) -> int:
    """The HTTP status of one call (a 404 is a status, not an error: callers ask for it)."""
    request = urllib.request.Request(
        url, data=data, headers=headers, method="POST" if data is not None else "GET"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return 404
        try:
            message = json.load(exc)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code}"
        raise UploadError(f"could not {what}: {message}") from exc
    except OSError as exc:
        raise UploadError(
            f"could not {what}: the local GCS emulator did not answer ({exc}); "
            f"`vtx local status` says whether it runs"
        ) from exc


def bucket_exists(endpoint: str, bucket: str) -> bool:
    status = _request(f"{endpoint}/storage/v1/b/{bucket}", f"look up bucket {bucket}")
    return status != 404


def create_bucket(endpoint: str, bucket: str) -> None:
    _request(
        f"{endpoint}/storage/v1/b?project={LOCAL_PROJECT}",
        f"create bucket {bucket}",
        json.dumps({"name": bucket}).encode(),
        **{"Content-Type": "application/json"},
    )


def upload_one(endpoint: str, item: Upload) -> None:
    """A simple media upload: on loopback one request per file is all a resumable upload
    would do, minus its round trips."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": item.target.name})
    _request(
        f"{endpoint}/upload/storage/v1/b/{item.target.bucket}/o?{query}",
        f"upload {item.source} to {item.target}",
        item.source.read_bytes(),
        **{"Content-Type": "application/octet-stream"},
    )


def upload_all(
    endpoint: str,
    uploads: list[Upload],
    *,
    create: bool = False,
    on_done: Callable[[Upload], None] = lambda _: None,
) -> bool:
    """Upload every item (calling ``on_done`` after each); returns whether the bucket was
    created. A missing bucket is an UploadError unless ``create``."""
    bucket = uploads[0].target.bucket
    created = False
    if not bucket_exists(endpoint, bucket):
        if not create:
            raise UploadError(
                f"bucket gs://{bucket} does not exist in the local platform's GCS; "
                f"add --create-bucket to create it, or upload into the stack's data bucket "
                f"(gs://{LOCAL_BUCKETS.data}/...)"
            )
        create_bucket(endpoint, bucket)
        created = True
    for item in uploads:
        upload_one(endpoint, item)
        on_done(item)
    return created
