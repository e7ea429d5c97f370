"""The checkpoints a run has committed, as its storage holds them: what a restart or the next
attempt would resume from, after the trainer's pruning (``save_total_limit``).

A checkpoint is a ``step-NNNNNNNNN/`` folder under the checkpoint root; it counts once its
``COMMITTED`` marker exists (the trainer writes the marker last). These two names are this
module's copy of `trainer/checkpoint/store.py`'s (the platform never imports the trainer);
tests/contracts/test_checkpoint_copy.py pins them. The root is the one the trainer's
"checkpoint committed" log lines name, else Vertex's ``AIP_CHECKPOINT_DIR``,
``<baseOutputDirectory>/checkpoints/``.

Listed with one call to GCS's JSON API (``objects.list`` with the root as prefix, a page per
thousand objects): the local platform's emulator anonymously, GCS with default credentials."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jobs.core.stack import StackOutputs
from jobs.vertex.google_session import NotAuthenticated, authorized_session, follow_pages

MARKER = "COMMITTED"
STEP_PREFIX = "step-"
GCS_API = "https://storage.googleapis.com"
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"


class CheckpointsError(Exception):
    """Storage could not be listed (the message says where and why)."""


def root_of(output_prefix: str | None, committed_path: str | None) -> str | None:
    """The checkpoint root: the parent of a committed step's folder, else Vertex's default."""
    if committed_path:
        return committed_path.rstrip("/").rsplit("/", 1)[0]
    return f"{output_prefix.rstrip('/')}/checkpoints" if output_prefix else None


def committed_steps(names: Iterable[str], root_path: str) -> list[int]:
    """Steps whose ``<root_path>/step-N/COMMITTED`` is among ``names`` (object names without the
    bucket), ascending; anything else under the root is ignored."""
    steps = set()
    for name in names:
        rest = name.removeprefix(f"{root_path.rstrip('/')}/")
        folder, _, leaf = rest.partition("/")
        digits = folder.removeprefix(STEP_PREFIX)
        if leaf == MARKER and folder.startswith(STEP_PREFIX) and digits.isdigit():
            steps.add(int(digits))
    return sorted(steps)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, path = uri.removeprefix("gs://").partition("/")
    return bucket, path.rstrip("/")


class Storage:
    """Object listings over GCS's JSON API (or the local platform's emulator)."""

    def __init__(self, stack: StackOutputs, session: Any = None) -> None:
        self.stack = stack
        self.api = (stack.gcs_endpoint or GCS_API).rstrip("/")
        if session is not None:
            self.session = session

    @cached_property
    def session(self) -> Any:
        """The emulator's plain session, or GCS's authorized one; made on first use."""
        if self.stack.gcs_endpoint:
            import requests

            return requests.Session()
        return authorized_session(READ_ONLY_SCOPE)

    def names(self, uri: str) -> list[str]:
        """Every object name under ``uri`` (``gs://bucket/prefix``)."""
        import google.auth.exceptions
        import requests

        bucket, path = _split(uri)
        params = {"prefix": f"{path}/", "fields": "items(name),nextPageToken"}
        url = f"{self.api}/storage/v1/b/{bucket}/o"

        def fetch(query: dict[str, Any]) -> dict:
            response = self.session.get(url, params=query, timeout=30)
            response.raise_for_status()
            return response.json()

        try:
            return [
                item["name"]
                for page in follow_pages(fetch, params)
                for item in page.get("items", [])
            ]
        except (
            requests.RequestException,
            google.auth.exceptions.GoogleAuthError,
            NotAuthenticated,
        ) as exc:
            raise CheckpointsError(f"cannot list {uri}: {exc}") from exc

    def committed(self, root: str) -> list[int]:
        """The committed steps under the checkpoint root ``root``, ascending."""
        return committed_steps(self.names(root), _split(root)[1])


@dataclass(frozen=True)
class Stored:
    """What storage holds under a run's checkpoint root."""

    root: str | None
    steps: list[int] | None
    """Committed steps, ascending; None when unknown (no root, or storage said no: ``error``)."""
    error: str | None = None


def stored_checkpoints(
    storage: Storage, output_prefix: str | None, committed_path: str | None
) -> Stored:
    """The committed checkpoints a resume would choose from; a listing that fails is reported,
    not raised: the rest of a status is worth showing without it."""
    root = root_of(output_prefix, committed_path)
    if root is None:
        return Stored(None, None)
    try:
        return Stored(root, storage.committed(root))
    except CheckpointsError as exc:
        return Stored(root, None, str(exc))
