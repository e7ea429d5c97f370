"""The control plane's SQLite store on its own: log entries numbered by attempt (the job's place
in its run) and tagged by restart (the replica's start that wrote them), and data dirs written
before that, whose log table is rebuilt without losing a line or moving a cursor."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from jobs.local.platform.store import Store

# log_entries as data dirs written before the restart column have it: `attempt` was the
# replica's start number, and service lines carried the job's own count.
OLD_LOG_TABLE = """
CREATE TABLE log_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    run_id TEXT,
    replica TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    ts TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX logs_run ON log_entries(run_id, seq);
CREATE INDEX logs_job ON log_entries(job_id, seq);
"""


def job(run_id: str | None) -> dict:
    labels = {"vtx-run-id": run_id} if run_id else {}
    return {"state": "JOB_STATE_SUCCEEDED", "labels": labels}


def test_attempts_number_a_runs_jobs_from_one_in_creation_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    for job_id, run_id in (("7", "run-a"), ("3", "other"), ("5", "run-a"), ("9", None)):
        store.put_job(job_id, job(run_id), {})
        store.add_log_lines(None, 0, job_id, run_id, "workerpool0-0", 0, [("t", job_id)])
    store.add_log_lines(None, 0, "5", "run-a", "service", None, [("t", "restarting")])
    entries = store.read_logs(run_id="run-a", job_id=None, cursor=0, limit=10)
    assert [(e.job_id, e.attempt, e.replica, e.restart) for e in entries] == [
        ("7", 1, "workerpool0-0", 0),  # created first, though its id sorts last
        ("5", 2, "workerpool0-0", 0),
        ("5", 2, "service", None),
    ]
    (alone,) = store.read_logs(run_id=None, job_id="9", cursor=0, limit=10)
    assert alone.attempt == 1  # no run id: a run of its own


def test_a_data_dir_from_before_restarts_keeps_its_lines_and_cursors(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    old = sqlite3.connect(path)
    old.executescript(OLD_LOG_TABLE)
    old.executemany(
        "INSERT INTO log_entries(job_id, run_id, replica, attempt, ts, message) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("1", "run", "workerpool0-0", 0, "t1", "first start"),
            ("1", "run", "service", 1, "t2", "restarting the job (job attempt 1)"),
            ("1", "run", "workerpool0-0", 1, "t3", "after a restart"),
        ],
    )
    old.commit()
    old.close()
    store = Store(path)
    store.add_log_lines(None, 0, "1", "run", "service", None, [("t4", "job succeeded")])
    entries = store.read_logs(run_id="run", job_id=None, cursor=0, limit=10)
    assert [(e.seq, e.replica, e.restart, e.message) for e in entries] == [
        (1, "workerpool0-0", 0, "first start"),
        (2, "service", None, "restarting the job (job attempt 1)"),
        (3, "workerpool0-0", 1, "after a restart"),
        (4, "service", None, "job succeeded"),  # the sequence goes on: cursors stay valid
    ]
    assert [e.seq for e in store.read_logs(run_id="run", job_id=None, cursor=2, limit=10)] == [
        3,
        4,
    ]


def test_commits_do_not_wait_for_the_disk_and_deletes_say_whether_they_found_a_row(
    tmp_path: Path,
) -> None:
    """WAL with synchronous=NORMAL (a crash of the control plane loses nothing; an fsync per
    commit made the executor's tick slow enough to queue creates). A delete's answer lets two
    racing deletes tell which of them removed the row."""
    store = Store(tmp_path / "db.sqlite")
    assert store._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    store.put_job("7", job(None), {})
    store.put_study("8", job(None), {})
    store.put_pipeline("9", job(None))
    store.put_endpoint("e", {})
    store.put_deployment("d", "e", {})
    store.put_model_version("m", "1", {})
    store.put_model_version("m", "2", {})
    deletes = [
        lambda: store.delete_job("7"),
        lambda: store.delete_study("8"),
        lambda: store.delete_pipeline("9"),
        lambda: store.delete_endpoint("e"),
        lambda: store.delete_deployment("d"),
        lambda: store.delete_model_versions("m", "2"),
        lambda: store.delete_model_versions("m"),
    ]
    assert [delete() for delete in deletes] == [True] * 7
    assert [delete() for delete in deletes] == [False] * 7


def test_endpoints_stored_by_bare_id_are_found_by_their_name(tmp_path: Path) -> None:
    name = "projects/424242424242/locations/us-central1/endpoints/e1"
    path = tmp_path / "jobs.sqlite"
    with sqlite3.connect(path) as db:  # as a data dir written while ids were global has it
        db.execute("CREATE TABLE endpoints (id TEXT PRIMARY KEY, resource TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE deployments "
            "(id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, record TEXT NOT NULL)"
        )
        db.execute("INSERT INTO endpoints VALUES ('e1', ?)", (f'{{"name": "{name}"}}',))
        db.execute("INSERT INTO deployments VALUES ('7', 'e1', ?)", (f'{{"endpoint": "{name}"}}',))
    store = Store(path)
    assert store.get_endpoint(name) == {"name": name}
    assert [p for p, _ in store.list_endpoints()] == [1]  # its creation order is kept
    store.close()
