"""Run records in the stack's checkpoints bucket, beside each run's outputs
(``gs://<checkpoints>/runs/<run id>/vtx-run.json``), through google-cloud-storage. Every write
is conditional on the generation the writer read (``if_generation_match``; 0 for a new record),
so two controllers, or a controller and `vtx launch`, never both change one run: the loser gets
``Conflict`` and reads again. Each record's phase (live or done) is also its object's metadata,
so a pass lists the live runs without downloading the ended ones. The controller's own liveness
(its last pass) is one object per stack beside them (``pass_path``), written once a pass."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from jobs.control.record import RECORD_NAME, ControllerPass, RunRecord, vertex_of
from jobs.core.heartbeat import HEARTBEAT_OBJECT, Heartbeat
from jobs.core.stack import RUNS_PREFIX, StackOutputs
from jobs.vertex.google_session import storage_client

log = logging.getLogger(__name__)

PHASE_KEY = "vtx-phase"
LIVE, DONE = "live", "done"


class RecordError(Exception):
    """A record that cannot be read or written (said with its gs:// name)."""


class Conflict(RecordError):
    """The record changed since it was read: read it again and decide again."""


@dataclass(frozen=True)
class Stored:
    record: RunRecord
    generation: int


def record_path(run_id: str) -> str:
    return f"{RUNS_PREFIX}{run_id}/{RECORD_NAME}"


def pass_path(stack: StackOutputs) -> str:
    """The controller's liveness object: under ``runs/`` (all the controller may write), beside
    the runs' folders and never one of them (a run id has no dot), one per stack's Vertex (two
    local platforms may share one bucket); a hash, since the Vertex is an endpoint URL."""
    vertex = hashlib.sha256(vertex_of(stack).encode()).hexdigest()[:16]
    return f"{RUNS_PREFIX}vtx-controller.{vertex}.json"


class Records:
    """A stack's run records."""

    def __init__(self, stack: StackOutputs, client: Any = None) -> None:
        self.stack = stack
        self._client = client
        self._bucket: Any = None

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            self._client = self._client or storage_client(self.stack)
            self._bucket = self._client.bucket(self.stack.buckets.checkpoints)
        return self._bucket

    def uri(self, run_id: str) -> str:
        return f"gs://{self.stack.buckets.checkpoints}/{record_path(run_id)}"

    def read(self, run_id: str) -> Stored | None:
        """The run's record and its generation; None when the run has none (launched without
        a controller, or before records existed)."""
        from google.api_core import exceptions

        blob = self.bucket.blob(record_path(run_id))
        try:
            text = blob.download_as_bytes()
        except exceptions.NotFound:
            return None
        return Stored(self._parse(run_id, text), int(blob.generation))

    def _parse(self, run_id: str, text: bytes) -> RunRecord:
        try:
            return RunRecord.model_validate_json(text)
        except ValidationError as exc:
            raise RecordError(
                f"{self.uri(run_id)} is not a vtx run record ({exc.error_count()} problems, "
                f"first: {exc.errors()[0]['msg']}); delete it to let the run go unwatched"
            ) from exc

    def heartbeat(self, run_id: str) -> Heartbeat | None:
        """The run's newest heartbeat (one object read); None when its trainer wrote none
        yet, or wrote what is not one (said once per pass in the log, never fatal: the guard
        then waits as for a start)."""
        from google.api_core import exceptions

        blob = self.bucket.blob(f"{RUNS_PREFIX}{run_id}/{HEARTBEAT_OBJECT}")
        try:
            return Heartbeat.model_validate_json(blob.download_as_bytes())
        except exceptions.NotFound:
            return None
        except ValidationError as exc:
            log.warning(
                "gs://%s/%s is not a heartbeat (%s); the guard waits as for a start",
                self.stack.buckets.checkpoints, blob.name, exc.errors()[0]["msg"],
            )  # fmt: skip
            return None

    def write(self, record: RunRecord, generation: int) -> int:
        """Write ``record`` if its object is still at ``generation`` (0: if none exists); the
        new generation. ``Conflict`` when another writer got there first."""
        from google.api_core import exceptions

        blob = self.bucket.blob(record_path(record.run_id))
        blob.metadata = {PHASE_KEY: LIVE if record.live else DONE}
        try:
            blob.upload_from_string(
                record.model_dump_json(),
                content_type="application/json",
                if_generation_match=generation,
            )
        except exceptions.PreconditionFailed as exc:
            raise Conflict(f"{self.uri(record.run_id)} changed since it was read") from exc
        return int(blob.generation)

    def create(self, record: RunRecord) -> int:
        """A new run's record; ``Conflict`` when the run already has one."""
        return self.write(record, 0)

    def passed(self, last: ControllerPass) -> None:
        """The controller's pass, written once a pass. A plain overwrite, no generation match:
        two passes at once (Scheduler's overlaps) each write a time a pass really ended, and
        a conditional write would cost a read per pass to say nothing truer."""
        from google.api_core import exceptions

        blob = self.bucket.blob(pass_path(self.stack))
        try:
            blob.upload_from_string(last.model_dump_json(), content_type="application/json")
        except exceptions.GoogleAPICallError as exc:
            raise RecordError(f"gs://{self.bucket.name}/{blob.name}: {exc}") from exc

    def last_pass(self) -> ControllerPass | None:
        """The controller's last pass over this stack; None before its first one (or when the
        object is not one: said in the log)."""
        from google.api_core import exceptions

        blob = self.bucket.blob(pass_path(self.stack))
        try:
            return ControllerPass.model_validate_json(blob.download_as_bytes())
        except exceptions.NotFound:
            return None
        except ValidationError as exc:
            log.warning("gs://%s/%s is not a controller pass (%s)",
                        self.bucket.name, blob.name, exc.errors()[0]["msg"])  # fmt: skip
            return None

    def live_ids(self) -> list[str]:
        """The run ids of the records not yet done (one listing, nothing downloaded)."""
        return [
            blob.name.removeprefix(RUNS_PREFIX).split("/", 1)[0]
            for blob in self.bucket.list_blobs(
                prefix=RUNS_PREFIX, match_glob=f"{RUNS_PREFIX}*/{RECORD_NAME}"
            )
            if (blob.metadata or {}).get(PHASE_KEY) != DONE
        ]

    def live(self) -> Iterator[Stored]:
        """Every live run's record (one listing; only the live ones are downloaded)."""
        for run_id in self.live_ids():
            stored = self.read(run_id)
            if stored is not None and stored.record.live:
                yield stored
