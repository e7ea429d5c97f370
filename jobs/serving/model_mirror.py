"""`vtx model mirror`: a model's files into the stack's models bucket, so that jobs of a stack
with no route to the internet (``network.egress: none``) load weights from ``gs://`` instead of
the Hugging Face Hub.

The source is a local directory, or a model id (``ORG/NAME``) already in the Hugging Face cache
of this machine (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``):
its snapshot of ``refs/<revision>``. Nothing is downloaded from the Hub here: fetch the model where
the Hub is reachable (``huggingface-cli download ORG/NAME``) and mirror it from there.

Each file lands at ``<prefix>/<relative path>``; hidden files and folders (``.cache``, ``.git``)
are left out. A file whose object already holds the same bytes (GCS's MD5 of the object equals
the file's) is skipped. After the uploads every object's MD5, computed by GCS from what it
received, is compared with the file's: a mismatch is an error naming the file. Then, last, the
manifest ``<prefix>/vtx-manifest.json`` records each file's size and SHA-256: its presence says
the mirror is complete. So a manifest left by an earlier mirror is deleted before anything is
uploaded: a re-mirror that fails half-way leaves no manifest vouching for files it has since
replaced, only the files, and running it again completes it. Objects under the prefix that the
source no longer has are reported, not deleted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.core.gcs_names import object_name_problem, split_gs_uri
from jobs.core.stack import StackOutputs

MANIFEST = "vtx-manifest.json"
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_CHUNK = 1 << 20


class MirrorError(Exception):
    """What could not be mirrored, and what to do instead."""


@dataclass(frozen=True)
class LocalFile:
    relative: str
    """The path under the model directory, with ``/``: the object name under the prefix."""
    path: Path
    size: int
    sha256: str
    md5: str
    """Base64, as GCS reports ``md5Hash``."""


@dataclass(frozen=True)
class Prefix:
    bucket: str
    path: str
    """Without a trailing ``/``; '' for the bucket's root."""

    @classmethod
    def parse(cls, uri: str) -> Prefix:
        try:
            bucket, path = split_gs_uri(uri, "gs://BUCKET/PREFIX")
        except ValueError as exc:
            raise MirrorError(f"--to {exc}") from None
        return cls(bucket, path.strip("/"))

    def object(self, relative: str) -> str:
        return f"{self.path}/{relative}" if self.path else relative

    def __str__(self) -> str:
        return f"gs://{self.bucket}/{self.path}"


@dataclass(frozen=True)
class MirrorResult:
    destination: Prefix
    uploaded: tuple[LocalFile, ...]
    unchanged: tuple[LocalFile, ...]
    extra: tuple[str, ...]
    """Objects under the prefix that the source does not have (left in place)."""

    @property
    def manifest_uri(self) -> str:
        return f"gs://{self.destination.bucket}/{self.destination.object(MANIFEST)}"


# --- the source -------------------------------------------------------------------------------


def hub_cache(environ: Mapping[str, str] = os.environ) -> Path:
    """Where huggingface_hub keeps downloaded models on this machine."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def resolve_source(source: str, cache: Path, revision: str = "main") -> tuple[Path, str]:
    """(the directory to copy, the name it gets under the models bucket)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path, path.resolve().name
    if not HUB_ID.fullmatch(source):
        raise MirrorError(
            f"{source}: no such directory, and not a Hugging Face model id (ORG/NAME)"
        )
    repo = cache / f"models--{source.replace('/', '--')}"
    ref = repo / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        raise MirrorError(
            f"{source} (revision {revision}) is not in the Hugging Face cache at {cache}: "
            f"download it where the Hub is reachable (`huggingface-cli download {source}`), "
            "set HF_HUB_CACHE to that cache, or give the model's directory"
        )
    return snapshot, source


def _digests(path: Path) -> tuple[str, str]:
    # MD5 only because it is the checksum GCS computes for an object (``md5Hash``).
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), base64.b64encode(md5.digest()).decode()


def local_files(directory: Path) -> list[LocalFile]:
    """Every file under ``directory`` (symlinks followed: a Hub snapshot links to its blobs),
    hidden ones left out, in a stable order."""
    files = []
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if relative.as_posix() == MANIFEST:
            continue
        sha256, md5 = _digests(path)
        files.append(LocalFile(relative.as_posix(), path, path.stat().st_size, sha256, md5))
    if not files:
        raise MirrorError(f"{directory} holds no files: nothing to mirror")
    return files


def destination(stack: StackOutputs, to: str | None, name: str) -> Prefix:
    """``--to``, else ``gs://<the stack's models bucket>/<name>``."""
    prefix = Prefix.parse(to) if to else Prefix(stack.buckets.models, name.strip("/"))
    for problem in filter(None, (object_name_problem(prefix.object(MANIFEST)),)):
        raise MirrorError(f"{prefix}: {problem}")
    return prefix


# --- the copy ---------------------------------------------------------------------------------


def _remote_md5s(bucket: Any, prefix: Prefix) -> dict[str, str | None]:
    listed = bucket.list_blobs(prefix=f"{prefix.path}/" if prefix.path else None)
    return {blob.name: blob.md5_hash for blob in listed}


def mirror(
    client: Any,
    files: list[LocalFile],
    prefix: Prefix,
    source: str,
    on_file: Callable[[LocalFile, bool], None] = lambda _file, _uploaded: None,
) -> MirrorResult:
    """Upload what changed, verify every object, then write the manifest."""
    from google.api_core import exceptions

    try:
        bucket = client.bucket(prefix.bucket)
        before = _remote_md5s(bucket, prefix)
        if prefix.object(MANIFEST) in before:
            bucket.blob(prefix.object(MANIFEST)).delete()
        uploaded, unchanged = [], []
        for file in files:
            name = prefix.object(file.relative)
            if before.get(name) == file.md5:
                unchanged.append(file)
                on_file(file, False)
                continue
            bucket.blob(name).upload_from_filename(str(file.path), checksum="md5")
            uploaded.append(file)
            on_file(file, True)
        _verify(_remote_md5s(bucket, prefix), files, prefix)
        manifest = {
            "source": source,
            "files": {f.relative: {"size": f.size, "sha256": f.sha256} for f in files},
        }
        bucket.blob(prefix.object(MANIFEST)).upload_from_string(
            json.dumps(manifest, indent=2, sort_keys=True), content_type="application/json"
        )
    except exceptions.NotFound as exc:
        raise MirrorError(
            f"{prefix}: bucket gs://{prefix.bucket} not found ({exc.message})"
        ) from None
    except exceptions.GoogleAPIError as exc:
        raise MirrorError(f"could not mirror to {prefix}: {exc}") from None
    wanted = {prefix.object(f.relative) for f in files} | {prefix.object(MANIFEST)}
    extra = tuple(sorted(set(before) - wanted))
    return MirrorResult(prefix, tuple(uploaded), tuple(unchanged), extra)


def _verify(after: Mapping[str, str | None], files: list[LocalFile], prefix: Prefix) -> None:
    """GCS computed each object's MD5 from the bytes it received: they must be the file's."""
    for file in files:
        stored = after.get(prefix.object(file.relative))
        if stored != file.md5:
            what = "is missing" if stored is None else f"has MD5 {stored}, the file {file.md5}"
            raise MirrorError(
                f"{prefix.object(file.relative)} {what} after the upload: run the mirror again"
            )
