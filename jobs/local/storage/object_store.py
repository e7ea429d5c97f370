"""The local GCS's objects on disk, keyed so that no two names can meet.

A file system folds names together (``a\\b`` and ``a/b`` on some, ``x/`` and ``x``, ``a//b``
and ``a/b``, ``.`` segments) and refuses others (over 255 bytes a segment); GCS names are any
UTF-8 up to 1,024 bytes. So an object's files are named after the SHA-256 of its name, never
the name itself:

    ROOT/buckets/BUCKET/bucket.json            the bucket's resource
    ROOT/buckets/BUCKET/objects/KEY.json       the object's metadata, its name included
    ROOT/buckets/BUCKET/objects/KEY.GENERATION its bytes, one file per generation
    ROOT/uploads/ID                            the bytes of a pending resumable upload
    ROOT/tmp/                                  uploads in flight

Bucket names are safe as folder names: GCS's rules allow only ``[a-z0-9._-]``, starting and
ending with a letter or digit (checked before a bucket is made). An object becomes visible
only when its metadata file is replaced (``os.replace``, atomic): an upload cut short, or
a process killed mid-write, leaves a temporary file that the next start removes, never a
partial object. Data files never change once written, so a reader that has one open keeps
reading the generation it asked for while a writer replaces the object.

Everything is indexed in memory (per bucket, names kept sorted) and guarded by one lock held
only for bookkeeping, never while bytes move. Pending resumable uploads live in memory: a
restart forgets them (their clients start over), as it would after GCS's one-week expiry.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import google_crc32c

from jobs.local.storage.glob_match import Glob

COPY_CHUNK = 1 << 20
LIST_MAX_RESULTS = 1000
"""GCS's page size when none is asked for, and the most it returns at once."""
LIST_MAX_STEPS = 500_000
"""Work one listing page may do (names looked at, plus matchGlob steps) before it returns what
it has with a nextPageToken: about a second, so no single request holds a thread for long."""
OBJECT_FIELDS = (
    "contentType",
    "contentEncoding",
    "contentDisposition",
    "contentLanguage",
    "cacheControl",
    "customTime",
    "metadata",
)
"""Writable object metadata (objects.insert, objects.patch)."""
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
"""Never in a text field: contentType and the others are sent back as response headers, where a
CR LF would add headers of its own to every download."""
DEFAULT_CONTENT_TYPE = "application/octet-stream"
FINISHED_SESSIONS_KEPT = 1000


class StoreError(Exception):
    """A request the store refuses: an HTTP code, Google's status name and the message."""

    def __init__(self, http_code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.http_code = http_code
        self.status = status
        self.message = message


def not_found(what: str) -> StoreError:
    return StoreError(404, "NOT_FOUND", f"{what} does not exist")


def _field_problem(key: str, value: Any) -> str | None:
    if value is None:  # a patch's "clear it"; an insert leaves it unset
        return None
    if key == "metadata":
        if not isinstance(value, dict):
            return f'metadata is {type(value).__name__}, not a map of strings ({{"key": "value"}})'
        nested = [k for k, v in value.items() if isinstance(v, dict | list)]
        if nested:
            return f"metadata[{nested[0]!r}] is not a string: metadata values are strings"
        return None
    if not isinstance(value, str):
        return f"{key} is {type(value).__name__} {value!r}, not a string"
    if CONTROL_CHARACTER.search(value):
        return f"{key} {value!r} holds a control character (CR, LF, ...); write it on one line"
    return None


def checked_labels(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A bucket's ``labels``: a map (a 400 otherwise); empty when absent."""
    labels = fields.get("labels") or {}
    if not isinstance(labels, dict):
        raise StoreError(
            400, "INVALID_ARGUMENT", f'labels is {type(labels).__name__}, not a map ({{"k": "v"}})'
        )
    return labels


def checked_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The writable fields of ``fields`` (others are not written), each of the type GCS takes:
    a 400 naming the first that is not. Every write of object metadata passes here."""
    chosen = {k: v for k, v in fields.items() if k in OBJECT_FIELDS}
    for key, value in chosen.items():
        problem = _field_problem(key, value)
        if problem:
            raise StoreError(400, "INVALID_ARGUMENT", problem)
    return chosen


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def object_key(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def _write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically: readers see the old document or the new one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    tmp.write_text(json.dumps(document))
    os.replace(tmp, path)


@dataclass(frozen=True)
class Digest:
    size: int
    md5: str
    crc32c: str


def digest_file(path: Path) -> Digest:
    """Size, MD5 and CRC32C (base64, as GCS writes them) of a file."""
    md5 = hashlib.md5(usedforsecurity=False)
    crc = google_crc32c.Checksum()
    size = 0
    with path.open("rb") as src:
        while chunk := src.read(COPY_CHUNK):
            md5.update(chunk)
            crc.update(chunk)
            size += len(chunk)
    return Digest(
        size, base64.b64encode(md5.digest()).decode(), base64.b64encode(crc.digest()).decode()
    )


@dataclass(frozen=True)
class Preconditions:
    """objects.* ``if(Meta)generation(Not)Match``: a 412 when the object does not satisfy them
    (``if_generation_match=0``: the object must not exist)."""

    if_generation_match: int | None = None
    if_generation_not_match: int | None = None
    if_metageneration_match: int | None = None
    if_metageneration_not_match: int | None = None

    def check(self, current: Mapping[str, Any] | None, what: str = "the object") -> None:
        generation = current["generation"] if current else 0
        metageneration = current["metageneration"] if current else None
        failed = (
            (self.if_generation_match is not None and generation != self.if_generation_match)
            or (
                self.if_generation_not_match is not None
                and generation == self.if_generation_not_match
            )
            or (
                self.if_metageneration_match is not None
                and metageneration != self.if_metageneration_match
            )
            or (
                self.if_metageneration_not_match is not None
                and metageneration == self.if_metageneration_not_match
            )
        )
        if failed:
            raise StoreError(
                412,
                "FAILED_PRECONDITION",
                f"precondition failed: {what} is at generation {generation}"
                + (f", metageneration {metageneration}" if metageneration else ""),
            )


@dataclass(frozen=True)
class ComposeSource:
    """One of compose's sourceObjects: its name, the generation asked for (None: the live one)
    and its ``objectPreconditions``."""

    name: str
    generation: int | None = None
    preconditions: Preconditions = Preconditions()


@dataclass
class _Bucket:
    resource: dict[str, Any]
    folder: Path
    names: list[str] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Session:
    """A resumable upload: where its bytes go, how many arrived, what it becomes."""

    id: str
    bucket: str
    name: str
    fields: dict[str, Any]
    preconditions: Preconditions
    path: Path
    received: int = 0
    result: dict[str, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Listing:
    items: list[dict[str, Any]]
    prefixes: list[str]
    next_start: str | None
    """The name the next page starts at, or None on the last page."""


@dataclass(frozen=True)
class ListQuery:
    prefix: str = ""
    delimiter: str = ""
    start: str = ""
    end: str | None = None
    max_results: int = LIST_MAX_RESULTS
    glob: Glob | None = None
    include_trailing_delimiter: bool = False


def _past_prefix(prefix: str) -> str:
    """The least string greater than every string that starts with ``prefix``."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return "\U0010ffff" * (len(prefix) + 1)
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)


class ObjectStore:
    """Buckets and objects under ``root`` (layout in the module docstring); thread-safe."""

    def __init__(self, root: Path, project_number: str) -> None:
        self.root = root
        self.project_number = project_number
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._sessions: dict[str, Session] = {}
        self._finished: deque[str] = deque()
        self._last_generation = 0
        for sub in ("buckets", "uploads", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("uploads", "tmp"):  # what a previous run left unfinished
            for leftover in (root / sub).iterdir():
                leftover.unlink()
        self._load()

    # -- start-up -------------------------------------------------------------------------------

    def _load(self) -> None:
        for folder in sorted((self.root / "buckets").iterdir()):
            if not (folder / "bucket.json").exists():  # a create cut short: never a bucket
                shutil.rmtree(folder)
                continue
            resource = json.loads((folder / "bucket.json").read_text())
            bucket = _Bucket(resource, folder)
            objects = folder / "objects"
            live: set[str] = set()
            for meta_path in objects.glob("*.json"):
                meta = json.loads(meta_path.read_text())
                bucket.objects[meta["name"]] = meta
                live.add(f"{meta_path.stem}.{meta['generation']}")
                self._last_generation = max(self._last_generation, meta["generation"])
            for path in objects.iterdir():  # data of replaced generations, temporary files
                if path.suffix != ".json" and path.name not in live:
                    path.unlink()
            bucket.names = sorted(bucket.objects)
            self._buckets[resource["name"]] = bucket

    # -- buckets --------------------------------------------------------------------------------

    def create_bucket(self, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        now = _now()
        resource = {
            "name": name,
            "projectNumber": self.project_number,
            "timeCreated": now,
            "updated": now,
            "location": str(fields.get("location") or "US-CENTRAL1").upper(),
            "storageClass": fields.get("storageClass") or "STANDARD",
            "labels": dict(checked_labels(fields)),
            "metageneration": 1,
        }
        with self._lock:
            if name in self._buckets:
                raise StoreError(
                    409, "ALREADY_EXISTS", f"bucket {name} already exists; pick another name"
                )
            folder = self.root / "buckets" / name
            (folder / "objects").mkdir(parents=True, exist_ok=True)
            _write_json(folder / "bucket.json", resource)
            self._buckets[name] = _Bucket(resource, folder)
        return dict(resource)

    def _bucket(self, name: str) -> _Bucket:
        bucket = self._buckets.get(name)
        if bucket is None:
            raise not_found(f"bucket {name}")
        return bucket

    def get_bucket(self, name: str) -> dict[str, Any]:
        with self._lock:
            return dict(self._bucket(name).resource)

    def list_buckets(self, prefix: str = "") -> list[dict[str, Any]]:
        with self._lock:
            return [
                dict(b.resource) for n, b in sorted(self._buckets.items()) if n.startswith(prefix)
            ]

    def patch_bucket(self, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        new_labels = checked_labels(fields)
        with self._lock:
            bucket = self._bucket(name)
            resource = dict(bucket.resource)
            if "labels" in fields:
                labels = dict(resource.get("labels") or {})
                for key, value in new_labels.items():
                    if value is None:
                        labels.pop(key, None)
                    else:
                        labels[key] = value
                resource["labels"] = labels
            resource["metageneration"] += 1
            resource["updated"] = _now()
            _write_json(bucket.folder / "bucket.json", resource)
            bucket.resource = resource
            return dict(resource)

    def delete_bucket(self, name: str) -> None:
        with self._lock:
            bucket = self._bucket(name)
            if bucket.objects:
                raise StoreError(
                    409,
                    "FAILED_PRECONDITION",
                    f"bucket {name} is not empty ({len(bucket.objects)} objects); delete its "
                    f"objects first",
                )
            pending = [s for s in self._sessions.values() if s.bucket == name and not s.result]
            if pending:
                raise StoreError(
                    409,
                    "FAILED_PRECONDITION",
                    f"bucket {name} has {len(pending)} resumable uploads in progress; finish "
                    f"or cancel them first",
                )
            del self._buckets[name]
            shutil.rmtree(bucket.folder)

    # -- objects --------------------------------------------------------------------------------

    def temp_file(self) -> Path:
        """A new, empty file to upload into; ``put`` moves it into place."""
        path = self.root / "tmp" / secrets.token_hex(16)
        path.touch()
        return path

    def get(self, bucket: str, name: str, generation: int | None = None) -> dict[str, Any]:
        with self._lock:
            return dict(self._object(bucket, name, generation))

    def _object(self, bucket: str, name: str, generation: int | None) -> dict[str, Any]:
        meta = self._bucket(bucket).objects.get(name)
        if meta is None or (generation is not None and meta["generation"] != generation):
            at = f" at generation {generation}" if generation is not None else ""
            raise not_found(f"object gs://{bucket}/{name}{at}")
        return meta

    def _data_path(self, bucket: _Bucket, meta: Mapping[str, Any]) -> Path:
        return bucket.folder / "objects" / f"{object_key(meta['name'])}.{meta['generation']}"

    @contextlib.contextmanager
    def open(
        self, bucket: str, name: str, generation: int | None = None
    ) -> Iterator[tuple[dict[str, Any], IO[bytes]]]:
        """The object's metadata and its bytes, opened together: a concurrent replace or
        delete does not change what is read."""
        with self._lock:
            meta = dict(self._object(bucket, name, generation))
            data = self._data_path(self._buckets[bucket], meta).open("rb")
        with data:
            yield meta, data

    def put(
        self,
        bucket: str,
        name: str,
        data: Path,
        fields: Mapping[str, Any],
        preconditions: Preconditions = Preconditions(),
    ) -> dict[str, Any]:
        """Make ``data`` (a file from ``temp_file``, consumed) the object's new generation."""
        try:
            fields = checked_fields(fields)
            digest = digest_file(data)
            with self._lock:
                target = self._bucket(bucket)
                current = target.objects.get(name)
                preconditions.check(current)
                self._last_generation = max(self._last_generation + 1, time.time_ns() // 1000)
                now = _now()
                meta: dict[str, Any] = {
                    "name": name,
                    "bucket": bucket,
                    "generation": self._last_generation,
                    "metageneration": 1,
                    "size": digest.size,
                    "md5Hash": digest.md5,
                    "crc32c": digest.crc32c,
                    "contentType": DEFAULT_CONTENT_TYPE,
                    "timeCreated": now,
                    "updated": now,
                }
                meta.update({k: v for k, v in fields.items() if v})
                os.replace(data, self._data_path(target, meta))
                _write_json(target.folder / "objects" / f"{object_key(name)}.json", meta)
                if current is not None:
                    self._data_path(target, current).unlink()
                else:
                    names = list(target.names)  # a new list: listings scan the old one unlocked
                    bisect.insort(names, name)
                    target.names = names
                target.objects[name] = meta
                return dict(meta)
        finally:
            data.unlink(missing_ok=True)

    def patch(
        self,
        bucket: str,
        name: str,
        fields: Mapping[str, Any],
        preconditions: Preconditions = Preconditions(),
        replace: bool = False,
        generation: int | None = None,
    ) -> dict[str, Any]:
        """objects.patch (``replace``: objects.update, which clears what it does not name) of
        the live object (404 when ``generation`` is given and is not the live one's)."""
        fields = checked_fields(fields)
        with self._lock:
            target = self._bucket(bucket)
            meta = dict(self._object(bucket, name, generation))
            preconditions.check(meta)
            if replace:
                for key in OBJECT_FIELDS:
                    meta.pop(key, None)
                meta["contentType"] = DEFAULT_CONTENT_TYPE
            for key, value in fields.items():
                if key == "metadata" and value is not None and not replace:
                    merged = dict(meta.get("metadata") or {})
                    for k, v in value.items():
                        if v is None:
                            merged.pop(k, None)
                        else:
                            merged[k] = v
                    meta["metadata"] = merged
                elif value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            meta["metageneration"] += 1
            meta["updated"] = _now()
            _write_json(target.folder / "objects" / f"{object_key(name)}.json", meta)
            target.objects[name] = meta
            return dict(meta)

    def delete(
        self,
        bucket: str,
        name: str,
        generation: int | None = None,
        preconditions: Preconditions = Preconditions(),
    ) -> None:
        with self._lock:
            target = self._bucket(bucket)
            meta = self._object(bucket, name, generation)
            preconditions.check(meta)
            (target.folder / "objects" / f"{object_key(name)}.json").unlink()
            self._data_path(target, meta).unlink()
            del target.objects[name]
            names = list(target.names)  # a new list: listings scan the old one unlocked
            del names[bisect.bisect_left(names, name)]
            target.names = names

    def copy_data(self, bucket: str, name: str, generation: int | None = None) -> Path:
        """A temporary file holding the object's bytes (a hard link where the file system
        allows one: data files never change)."""
        target = self.temp_file()
        target.unlink()
        with self._lock:
            meta = self._object(bucket, name, generation)
            source = self._data_path(self._buckets[bucket], meta)
            try:
                os.link(source, target)
                return target
            except OSError:
                handle = source.open("rb")
        with handle, target.open("wb") as out:
            shutil.copyfileobj(handle, out, COPY_CHUNK)
        return target

    def compose(self, bucket: str, sources: list[ComposeSource]) -> Path:
        """A temporary file holding the sources' bytes, in order; a 412 when a source does not
        meet its preconditions (checked against the very generation that is read)."""
        target = self.temp_file()
        try:
            with target.open("wb") as out:
                for source in sources:
                    with self.open(bucket, source.name, source.generation) as (meta, data):
                        source.preconditions.check(meta, f"source gs://{bucket}/{source.name}")
                        shutil.copyfileobj(data, out, COPY_CHUNK)
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return target

    def list(self, bucket: str, query: ListQuery) -> Listing:
        """One page of objects.list: items and prefixes in name order, their count at most
        ``max_results``, and the work bounded by LIST_MAX_STEPS. The scan runs without the
        lock, over the name list of the moment (writers replace the list, never change it)."""
        with self._lock:
            target = self._bucket(bucket)
            names, objects = target.names, target.objects
        at = bisect.bisect_left(names, max(query.prefix, query.start))
        items: list[dict[str, Any]] = []
        prefixes: list[str] = []
        steps = 0
        while at < len(names):
            name = names[at]
            if not name.startswith(query.prefix) or (query.end and name >= query.end):
                break
            work = steps + (query.glob.steps if query.glob else 0)
            if len(items) + len(prefixes) >= query.max_results or work > LIST_MAX_STEPS:
                return Listing(items, prefixes, name)
            steps += 1
            meta = objects.get(name)  # None: deleted since the list was taken
            if query.delimiter:
                cut = name.find(query.delimiter, len(query.prefix))
                if cut >= 0:
                    prefix = name[: cut + len(query.delimiter)]
                    if query.glob is None or query.glob.matches(prefix):
                        prefixes.append(prefix)
                        if query.include_trailing_delimiter and name == prefix and meta:
                            items.append(dict(meta))
                    at = bisect.bisect_left(names, _past_prefix(prefix), at + 1)
                    continue
            if meta and (query.glob is None or query.glob.matches(name)):
                items.append(dict(meta))
            at += 1
        return Listing(items, prefixes, None)

    # -- resumable uploads ----------------------------------------------------------------------

    def start_session(
        self, bucket: str, name: str, fields: Mapping[str, Any], preconditions: Preconditions
    ) -> Session:
        fields = checked_fields(fields)  # refused now, not after the upload
        with self._lock:
            self._bucket(bucket)
            session_id = secrets.token_urlsafe(24)
            path = self.root / "uploads" / session_id
            path.touch()
            session = Session(session_id, bucket, name, dict(fields), preconditions, path)
            self._sessions[session_id] = session
            return session

    def session(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise not_found(f"resumable upload {session_id!r} (finished, cancelled or unknown)")
        return session

    def finish_session(self, session: Session) -> dict[str, Any]:
        """Make a session's bytes the object; the caller holds ``session.lock``. A finished
        session answers with its object until FINISHED_SESSIONS_KEPT newer ones finished (a
        client may ask again when an answer was lost); a refused one is gone."""
        data = self.temp_file()
        os.replace(session.path, data)
        try:
            session.result = self.put(
                session.bucket, session.name, data, session.fields, session.preconditions
            )
        except StoreError:
            self.cancel_session(session)
            raise
        with self._lock:
            self._finished.append(session.id)
            while len(self._finished) > FINISHED_SESSIONS_KEPT:
                self._sessions.pop(self._finished.popleft(), None)
        return session.result

    def cancel_session(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)
        session.path.unlink(missing_ok=True)
