"""SQLite persistence of the control plane: job records, executor runtime state, studies
(HyperparameterTuningJobs), training pipelines, models (one row per version) and their
operations, endpoints and their serving processes (deployments), persistent resources, log
entries.

Jobs and studies are stored as their REST form (camelCase JSON, enum names) next to their
runtime record (pids, restarts, timers; a study's trials), so a restarted control plane can
re-attach to running replicas. Log lines are copied from per-replica files into one table
whose row id is the cursor `vtx logs` pages with. A data dir written before studies existed
gets their table at the next start (CREATE TABLE IF NOT EXISTS): nothing else changes.
Endpoints and models are keyed by their resource names (their ids are unique within a project
and location only), deployments by their endpoint's name and their id (unique within it only);
a data dir written while those ids were keys on their own is re-keyed when it is opened.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jobs.core.contract import LABEL_RUN_ID

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    run_id TEXT,
    state TEXT NOT NULL,
    resource TEXT NOT NULL,
    runtime TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_run ON jobs(run_id);
CREATE TABLE IF NOT EXISTS log_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    run_id TEXT,
    replica TEXT NOT NULL,
    restart INTEGER,
    ts TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_run ON log_entries(run_id, seq);
CREATE INDEX IF NOT EXISTS logs_job ON log_entries(job_id, seq);
CREATE TABLE IF NOT EXISTS studies (
    id TEXT PRIMARY KEY,
    run_id TEXT,
    state TEXT NOT NULL,
    resource TEXT NOT NULL,
    runtime TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pipelines (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    resource TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    id TEXT NOT NULL,  -- the model's resource name: ids are per project and location
    version TEXT NOT NULL,
    resource TEXT NOT NULL,
    PRIMARY KEY (id, version)
);
CREATE TABLE IF NOT EXISTS operations (
    name TEXT PRIMARY KEY,
    resource TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS endpoints (
    id TEXT PRIMARY KEY,  -- the endpoint's resource name: ids are per project and location
    resource TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deployments (
    id TEXT NOT NULL,  -- the deployed model's id: unique within its endpoint only
    endpoint_id TEXT NOT NULL,  -- the endpoint's resource name
    record TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, id)
);
CREATE TABLE IF NOT EXISTS persistent_resources (
    id TEXT PRIMARY KEY,  -- the resource's name: ids are per project and location
    resource TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS log_offsets (
    path TEXT PRIMARY KEY,
    offset INTEGER NOT NULL
);
"""


STORE_FILE = "jobs.sqlite"
"""The store's file in the platform's data dir."""

# Data dirs written before log_entries.restart: the column was `attempt` (NOT NULL, the service
# lines numbered too). The table is rebuilt once; its row ids, the cursors, are kept.
OLD_LOG_COLUMN = "attempt"
MIGRATE_LOGS = f"""
ALTER TABLE log_entries RENAME TO log_entries_before_restart;
DROP INDEX IF EXISTS logs_run;
DROP INDEX IF EXISTS logs_job;
{SCHEMA}
INSERT INTO log_entries(seq, job_id, run_id, replica, restart, ts, message)
    SELECT seq, job_id, run_id, replica,
           CASE WHEN replica = 'service' THEN NULL ELSE {OLD_LOG_COLUMN} END, ts, message
    FROM log_entries_before_restart;
DROP TABLE log_entries_before_restart;
"""

# Data dirs written while endpoints and models were keyed by their bare id: keyed by their
# name instead (a model's rows all carry its name, without @VERSION).
IDS_TO_NAMES = """
UPDATE endpoints SET id = json_extract(resource, '$.name') WHERE id NOT LIKE 'projects/%';
UPDATE models SET id = json_extract(resource, '$.name') WHERE id NOT LIKE 'projects/%';
"""

# Data dirs written while a deployed model's id was its whole key: the table is rebuilt once,
# keyed by (endpoint, id), with each row's endpoint named (it was a bare id before endpoints
# were keyed by name). Row ids, the deployments' order, are kept.
DEPLOYMENTS_BY_ENDPOINT = f"""
ALTER TABLE deployments RENAME TO deployments_by_id;
{SCHEMA}
INSERT INTO deployments(rowid, id, endpoint_id, record)
    SELECT rowid, id, CASE WHEN endpoint_id LIKE 'projects/%' THEN endpoint_id
                           ELSE json_extract(record, '$.endpoint') END, record
    FROM deployments_by_id;
DROP TABLE deployments_by_id;
"""

# A job's attempt: its place among the jobs of its run, in creation order (rowid), from 1; a job
# without a run id (or deleted since) is its own first attempt.
ATTEMPT_OF_JOB = (
    "MAX(1, (SELECT COUNT(*) FROM jobs AS j, jobs AS o WHERE j.id = log_entries.job_id "
    "AND o.run_id = j.run_id AND o.rowid <= j.rowid))"
)


@dataclass(frozen=True)
class LogEntry:
    seq: int
    job_id: str
    attempt: int
    """The job's attempt of its run, from 1 (ATTEMPT_OF_JOB)."""
    replica: str
    restart: int | None
    """Which restart of the replica wrote the line: 0 its first start; None for the
    platform's own lines (replica ``service``)."""
    ts: str
    message: str


class Store:
    """One connection shared by the executor thread and the request handlers, under a lock:
    SQLite serialises writers anyway, and the traffic is a few writes per second.

    Every statement commits on its own, so its cost is what a commit costs: in WAL mode with
    ``synchronous=NORMAL`` a commit writes the log without waiting for the disk to flush it
    (https://www.sqlite.org/pragma.html#pragma_synchronous: "WAL mode is always consistent with
    synchronous=NORMAL"; a crash of the control plane loses nothing, only a power loss may roll
    the last commits back). With the default
    FULL every commit waits for an fsync, milliseconds each, and the executor's tick, which
    commits several times per job under its lock, made concurrent creates queue for seconds.

    The ``delete_*`` methods say whether there was something to delete: two deletes of one
    resource that race get one True between them (the other caller answers 404)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()
        self._db.executescript(SCHEMA)
        self._db.executescript(f"BEGIN;{IDS_TO_NAMES}COMMIT;")
        self._lock = threading.RLock()

    def _migrate(self) -> None:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(log_entries)")}
        if OLD_LOG_COLUMN in columns:
            self._db.executescript(f"BEGIN;{MIGRATE_LOGS}COMMIT;")
        # PRAGMA table_info's pk: the column's place in the primary key, 0 when not in it.
        keyed = {row[1]: row[5] for row in self._db.execute("PRAGMA table_info(deployments)")}
        if keyed and not keyed.get("endpoint_id"):
            self._db.executescript(f"BEGIN;{DEPLOYMENTS_BY_ENDPOINT}COMMIT;")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store for a read, a check and the writes that follow from it, so that no
        other request interleaves (two uploads must not both take a model's next version
        number, nor both find a modelId free): the lock for this process's threads, BEGIN
        IMMEDIATE for any other process writing the file. All of it or nothing: rolled back on
        an error. Reentrant: inside a transaction it joins the one under way."""
        with self._lock:
            if self._db.in_transaction:
                yield
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _deleted(self, sql: str, *params: str) -> bool:
        """Run a DELETE; whether it removed a row. Callers hold the lock."""
        return self._db.execute(sql, params).rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def put_job(self, job_id: str, resource: dict, runtime: dict) -> None:
        run_id = resource.get("labels", {}).get(LABEL_RUN_ID)
        with self._lock:
            # An upsert, not INSERT OR REPLACE: REPLACE deletes the row and gives it a new rowid,
            # and rowid is the creation order that listing and its page tokens rely on.
            self._db.execute(
                "INSERT INTO jobs(id, run_id, state, resource, runtime) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET run_id = excluded.run_id, state = excluded.state, "
                "resource = excluded.resource, runtime = excluded.runtime",
                (job_id, run_id, resource["state"], json.dumps(resource), json.dumps(runtime)),
            )

    def get_job(self, job_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT resource FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def get_runtime(self, job_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT runtime FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def list_jobs(self, before: int | None = None) -> list[tuple[int, dict]]:
        """(position, job) for every job created before ``position`` (all if None), newest
        first as Vertex lists them. Positions only grow, so they make stable page tokens."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM jobs WHERE rowid < ? ORDER BY rowid DESC",
                (before if before is not None else 2**62,),
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def run_jobs(self, run_id: str) -> list[dict]:
        """Every job of a run (its attempts), oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT resource FROM jobs WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def active_jobs(self, states: tuple[str, ...]) -> list[tuple[dict, dict]]:
        marks = ",".join("?" * len(states))
        with self._lock:
            rows = self._db.execute(
                f"SELECT resource, runtime FROM jobs WHERE state IN ({marks}) ORDER BY rowid",
                states,
            ).fetchall()
        return [(json.loads(a), json.loads(b)) for a, b in rows]

    def delete_job(self, job_id: str) -> bool:
        with self._lock:
            return self._deleted("DELETE FROM jobs WHERE id = ?", job_id)

    def unused_id(self) -> str:
        """A 19-digit numeric id, like Vertex's, that no job or study has."""
        while True:
            new_id = str(10**18 + secrets.randbelow(9 * 10**18))
            if self.get_job(new_id) is None and self.get_study(new_id) is None:
                return new_id

    # -- studies (HyperparameterTuningJobs) ----------------------------------------------------

    def put_study(self, study_id: str, resource: dict, runtime: dict) -> None:
        run_id = resource.get("labels", {}).get(LABEL_RUN_ID)
        with self._lock:
            self._db.execute(
                "INSERT INTO studies(id, run_id, state, resource, runtime) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET run_id = excluded.run_id, state = excluded.state, "
                "resource = excluded.resource, runtime = excluded.runtime",
                (study_id, run_id, resource["state"], json.dumps(resource), json.dumps(runtime)),
            )

    def get_study(self, study_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT resource FROM studies WHERE id = ?", (study_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_studies(self, before: int | None = None) -> list[tuple[int, dict]]:
        """(position, study), newest first, as ``list_jobs``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM studies WHERE rowid < ? ORDER BY rowid DESC",
                (before if before is not None else 2**62,),
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def active_studies(self, states: tuple[str, ...]) -> list[tuple[dict, dict]]:
        marks = ",".join("?" * len(states))
        with self._lock:
            rows = self._db.execute(
                f"SELECT resource, runtime FROM studies WHERE state IN ({marks}) ORDER BY rowid",
                states,
            ).fetchall()
        return [(json.loads(a), json.loads(b)) for a, b in rows]

    def delete_study(self, study_id: str) -> bool:
        with self._lock:
            return self._deleted("DELETE FROM studies WHERE id = ?", study_id)

    # -- training pipelines (their backing CustomJobs are jobs like any other) ----------------

    def put_pipeline(self, pipeline_id: str, resource: dict) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO pipelines(id, state, resource) VALUES (?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET state = excluded.state, "
                "resource = excluded.resource",
                (pipeline_id, resource["state"], json.dumps(resource)),
            )

    def get_pipeline(self, pipeline_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT resource FROM pipelines WHERE id = ?", (pipeline_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_pipelines(self, before: int | None = None) -> list[tuple[int, dict]]:
        """(position, pipeline), newest first, as ``list_jobs``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM pipelines WHERE rowid < ? ORDER BY rowid DESC",
                (before if before is not None else 2**62,),
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def active_pipelines(self, states: tuple[str, ...]) -> list[dict]:
        marks = ",".join("?" * len(states))
        with self._lock:
            rows = self._db.execute(
                f"SELECT resource FROM pipelines WHERE state IN ({marks}) ORDER BY rowid", states
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def delete_pipeline(self, pipeline_id: str) -> bool:
        with self._lock:
            return self._deleted("DELETE FROM pipelines WHERE id = ?", pipeline_id)

    # -- models (one row per version) and long-running operations ----------------------------

    def put_model_version(self, model: str, version_id: str, resource: dict) -> None:
        """Insert or update one version of the model named ``model``
        (``projects/N/locations/L/models/ID``: Vertex's model ids are per project and location)
        as an upsert: its rowid, the creation order, is kept."""
        with self._lock:
            self._db.execute(
                "INSERT INTO models(id, version, resource) VALUES (?, ?, ?) "
                "ON CONFLICT(id, version) DO UPDATE SET resource = excluded.resource",
                (model, version_id, json.dumps(resource)),
            )

    def model_versions(self, model: str) -> list[tuple[int, dict]]:
        """(position, version) of the model named ``model``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM models WHERE id = ? ORDER BY rowid", (model,)
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def list_model_versions(self) -> list[tuple[int, dict]]:
        """(position, version) of every model's every version, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT rowid, resource FROM models ORDER BY rowid").fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def delete_model_versions(self, model: str, version_id: str | None = None) -> bool:
        """One version, or every version of the model named ``model`` (``version_id`` None)."""
        with self._lock:
            if version_id is None:
                return self._deleted("DELETE FROM models WHERE id = ?", model)
            return self._deleted(
                "DELETE FROM models WHERE id = ? AND version = ?", model, version_id
            )

    def put_operation(self, name: str, resource: dict) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO operations(name, resource) VALUES (?, ?)",
                (name, json.dumps(resource)),
            )

    def get_operation(self, name: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT resource FROM operations WHERE name = ?", (name,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def operations_under(self, prefix: str) -> list[str]:
        """The names of the operations whose name starts with ``prefix``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name FROM operations WHERE substr(name, 1, ?) = ?", (len(prefix), prefix)
            ).fetchall()
        return [r[0] for r in rows]

    # -- endpoints and the serving processes of their deployed models ------------------------

    def put_endpoint(self, name: str, resource: dict) -> None:
        """Insert or update the endpoint named ``name`` (``projects/N/locations/L/endpoints/ID``:
        Vertex's endpoint ids are per project and location) as an upsert: its rowid, the
        creation order, is kept."""
        with self._lock:
            self._db.execute(
                "INSERT INTO endpoints(id, resource) VALUES (?, ?) "
                "ON CONFLICT(id) DO UPDATE SET resource = excluded.resource",
                (name, json.dumps(resource)),
            )

    def get_endpoint(self, name: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT resource FROM endpoints WHERE id = ?", (name,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_endpoints(self) -> list[tuple[int, dict]]:
        """(position, endpoint) of every endpoint, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM endpoints ORDER BY rowid"
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def delete_endpoint(self, name: str) -> bool:
        with self._lock:
            return self._deleted("DELETE FROM endpoints WHERE id = ?", name)

    # -- persistent resources ----------------------------------------------------------------

    def put_persistent_resource(self, name: str, resource: dict) -> None:
        """Insert or update, keyed by name, keeping the rowid (the creation order)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO persistent_resources(id, resource) VALUES (?, ?) "
                "ON CONFLICT(id) DO UPDATE SET resource = excluded.resource",
                (name, json.dumps(resource)),
            )

    def get_persistent_resource(self, name: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT resource FROM persistent_resources WHERE id = ?", (name,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_persistent_resources(self) -> list[tuple[int, dict]]:
        """(position, resource) of every persistent resource, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, resource FROM persistent_resources ORDER BY rowid"
            ).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def delete_persistent_resource(self, name: str) -> bool:
        with self._lock:
            return self._deleted("DELETE FROM persistent_resources WHERE id = ?", name)

    def put_deployment(self, endpoint: str, deployed_model_id: str, record: dict) -> None:
        """A deployed model's serving process on the endpoint named ``endpoint``: its state,
        pid, port, log file, operation. A DeployedModel's id is unique within its endpoint only
        (endpoint.proto), so the two together are the key."""
        with self._lock:
            self._db.execute(
                "INSERT INTO deployments(endpoint_id, id, record) VALUES (?, ?, ?) "
                "ON CONFLICT(endpoint_id, id) DO UPDATE SET record = excluded.record",
                (endpoint, deployed_model_id, json.dumps(record)),
            )

    def get_deployment(self, endpoint: str, deployed_model_id: str) -> dict | None:
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM deployments WHERE endpoint_id = ? AND id = ?",
                (endpoint, deployed_model_id),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_deployments(self) -> list[dict]:
        """Every deployment's record, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT record FROM deployments ORDER BY rowid").fetchall()
        return [json.loads(r[0]) for r in rows]

    def delete_deployment(self, endpoint: str, deployed_model_id: str) -> bool:
        with self._lock:
            return self._deleted(
                "DELETE FROM deployments WHERE endpoint_id = ? AND id = ?",
                endpoint,
                deployed_model_id,
            )

    # -- logs -------------------------------------------------------------------------------

    def log_offset(self, path: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT offset FROM log_offsets WHERE path = ?", (path,)
            ).fetchone()
        return row[0] if row else 0

    def add_log_lines(
        self,
        path: str | None,
        offset: int,
        job_id: str,
        run_id: str | None,
        replica: str,
        restart: int | None,
        lines: list[tuple[str, str]],
    ) -> None:
        """Append (timestamp, message) lines of ``replica``'s ``restart`` (None: the platform's
        own lines) and move the file's offset (if the lines came from a file), in one
        transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO log_entries(job_id, run_id, replica, restart, ts, message) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(job_id, run_id, replica, restart, ts, msg) for ts, msg in lines],
            )
            if path is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO log_offsets(path, offset) VALUES (?, ?)", (path, offset)
                )
            self._db.execute("COMMIT")

    def read_logs(
        self, *, run_id: str | None, job_id: str | None, cursor: int, limit: int
    ) -> list[LogEntry]:
        column, value = ("run_id", run_id) if run_id is not None else ("job_id", job_id)
        with self._lock:
            rows = self._db.execute(
                f"SELECT seq, job_id, {ATTEMPT_OF_JOB}, replica, restart, ts, message "
                "FROM log_entries "
                f"WHERE {column} = ? AND seq > ? ORDER BY seq LIMIT ?",
                (value, cursor, limit),
            ).fetchall()
        return [LogEntry(*row) for row in rows]
