"""The process executor: runs CustomJob replicas as local process groups with Vertex's semantics.

One thread ticks every ``TICK_S`` over the active jobs: admits QUEUED jobs when replicas are
free, polls replicas, applies Vertex's rules to their exits (VERTEX.md, "Preemption and
restarts"), enforces timeouts and grace periods, delivers preemptions (asked for or seeded
chaos) and copies log lines into the store. Everything it must remember across a control-plane
crash lives in the job's runtime record in SQLite; replicas run in sessions of their own and
write their exit code to a file, so a restarted executor re-attaches to them.

Rules implemented (retry limits per VERTEX.md; which exits count as infrastructure is ours):
- the job succeeds when the primary (workerpool0-0) exits 0; other replicas are then stopped;
- a replica exiting non-zero by itself fails the job (134/139, SIGABRT/SIGSEGV: the whole job is
  retried up to 3 times unless ``disableRetries``);
- a replica lost to a preemption (delivered here) or to an infrastructure fault (its runner
  vanished) is restarted, up to 5 times per replica, then the whole job up to 3 times; with
  ``restartJobOnWorkerRestart`` every replica restarts with it. Exits of other replicas in the
  window after a preemption belong to it: the trainer turns one SIGTERM into a collective
  stop, and those replicas exit 143 by design, not by failure.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
from pydantic import BaseModel, Field

from jobs.local import vertex_env
from jobs.local.settings import LocalSettings
from jobs.local.state import LOCAL_PROJECT_NUMBER
from jobs.local.store import Store

log = logging.getLogger(__name__)

TICK_S = 0.2
WORKER_RESTART_LIMIT = 5
JOB_RETRY_LIMIT = 3
CRASH_EXIT_CODES = frozenset({134, 139})
SIGKILL_EXIT_CODE = 137
SIGTERM_EXIT_CODE = 143

QUEUED, PENDING, RUNNING = "JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING"
SUCCEEDED, FAILED = "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"
CANCELLING, CANCELLED = "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"
ACTIVE_STATES = (QUEUED, PENDING, RUNNING, CANCELLING)
TERMINAL_STATES = (SUCCEEDED, FAILED, CANCELLED)

# google.rpc.Code values Vertex uses in CustomJob.error.
CODE_CANCELLED, CODE_INVALID_ARGUMENT, CODE_DEADLINE_EXCEEDED = 1, 3, 4
CODE_INTERNAL, CODE_UNAVAILABLE = 13, 14

CHAOS_RATE_LABEL = "vtx-chaos-per-hour"
CHAOS_SEED_LABEL = "vtx-chaos-seed"


class ExecutorError(Exception):
    """A request the executor refuses; ``status`` is the google.rpc status name."""

    def __init__(self, http_code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.http_code, self.status, self.message = http_code, status, message


class NotYetRunning(ExecutorError):
    """The job or replica asked for will run but does not yet (QUEUED, PENDING, starting)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "FAILED_PRECONDITION", message)


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Replica(BaseModel):
    name: str
    pool: int
    index: int
    attempt: int = 0
    """How many times this replica was started before this run of it (0 first)."""
    restarts: int = 0
    """Restarts counted against Vertex's worker restart limit."""
    status: str = "new"  # new | running | exited
    pid: int | None = None
    create_time: float | None = None
    log_path: str | None = None
    exit_path: str | None = None
    exit_code: int | None = None
    term_at: float | None = None
    killed: bool = False
    preempted: bool = False


class Runtime(BaseModel):
    """The executor's memory of one job, persisted next to it."""

    replicas: list[Replica]
    ports: dict[str, int] = Field(default_factory=dict)
    job_attempt: int = 0
    job_retries: int = 0
    started_at: float | None = None
    stopping: str | None = None  # success | failed | cancel | timeout | restart | shutdown
    final_error: dict | None = None
    preemption_until: float | None = None
    chaos: list[tuple[float, int]] = Field(default_factory=list)
    chaos_next: int = 0


class Executor:
    def __init__(self, store: Store, settings: LocalSettings) -> None:
        self.store = store
        self.settings = settings
        self.data_dir = settings.data_dir
        self.cwd = settings.cwd
        self.gcs_endpoint = settings.gcs_endpoint
        self.project_number = LOCAL_PROJECT_NUMBER
        self.max_replicas = settings.max_replicas
        self.grace_s = settings.grace_s
        self.chaos_per_hour = settings.chaos_per_hour
        self.chaos_seed = settings.chaos_seed
        self._jobs: dict[str, tuple[dict, Runtime]] = {}
        self._procs: dict[tuple[str, str, int], subprocess.Popen[bytes]] = {}
        self._offsets: dict[str, int] = {}
        self._lock = threading.RLock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vtx-executor", daemon=True)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._reattach()
        self._thread.start()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop every running replica (SIGTERM, grace, SIGKILL) and fail their jobs."""
        with self._lock:
            for job_id, (job, rt) in list(self._jobs.items()):
                if job["state"] in (QUEUED, PENDING):
                    self._set_state(job, rt, FAILED, self._platform_stopped_error())
                    self._jobs.pop(job_id)
                elif rt.stopping is None:
                    self._stop_all(job, rt, "shutdown", self._platform_stopped_error())
        deadline = time.monotonic() + (timeout_s or self.grace_s + 10)
        while time.monotonic() < deadline:
            with self._lock:
                if not self._jobs:
                    break
            time.sleep(TICK_S)
        self._halt.set()
        self._thread.join(timeout=5)

    @staticmethod
    def _platform_stopped_error() -> dict:
        return {
            "code": CODE_UNAVAILABLE,
            "message": "The local platform was stopped (vtx local down) while the job ran.",
        }

    def _reattach(self) -> None:
        for job, raw in self.store.active_jobs(ACTIVE_STATES):
            rt = Runtime.model_validate(raw)
            self._jobs[self._job_id(job)] = (job, rt)
            live = sum(1 for r in rt.replicas if r.status == "running")
            if job["state"] != QUEUED:
                self._service_log(
                    job, rt, f"control plane restarted; re-attached to {live} replicas"
                )
                self._persist(job, rt)

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                with self._lock:
                    self._tick()
            except Exception:  # keep supervising the other jobs; the failure is in the log
                log.exception("executor tick failed")
            self._halt.wait(TICK_S)

    # -- requests ------------------------------------------------------------------------------

    def check_fits(self, job: dict) -> None:
        """Refuse replica counts this platform cannot run, before anything is built from them:
        a count is data, not a loop bound, until it is known to fit (the server asks first,
        before validation; submit asks again for callers that skip the server)."""
        counts = vertex_env.replica_counts(job)
        for i, count in enumerate(counts):
            if count < 0:
                raise ExecutorError(
                    400,
                    "INVALID_ARGUMENT",
                    f"jobSpec.workerPoolSpecs[{i}].replicaCount: {count} is negative; "
                    f"write 1 or more",
                )
        if sum(counts) > self.max_replicas:
            raise ExecutorError(
                429,
                "RESOURCE_EXHAUSTED",
                f"the job needs {sum(counts)} replicas but this local platform runs at most "
                f"{self.max_replicas} at once; lower replicaCount or restart it with "
                f"`vtx local up --max-replicas N`",
            )

    def submit(self, job: dict) -> dict:
        """Accept a new job (already validated and named): QUEUED until replicas are free."""
        self.check_fits(job)
        slots = vertex_env.replica_slots(job)
        rt = Runtime(replicas=[Replica(name=s.name, pool=s.pool, index=s.index) for s in slots])
        rt.chaos = self._chaos_schedule(job, len(slots))
        with self._lock:
            job["state"] = QUEUED
            job["createTime"] = job["updateTime"] = now_rfc3339()
            self._jobs[self._job_id(job)] = (job, rt)
            self._persist(job, rt)
            self._service_log(job, rt, f"job accepted: {len(slots)} replica(s)")
        return job

    def cancel(self, job_id: str) -> dict:
        with self._lock:
            entry = self._jobs.get(job_id)
            if entry is None:
                job = self.store.get_job(job_id)
                if job is None:
                    raise KeyError(job_id)
                return job  # already terminal: cancelling is a no-op, as on Vertex
            job, rt = entry
            if job["state"] == QUEUED:
                self._set_state(job, rt, CANCELLED, {"code": CODE_CANCELLED, "message": "CANCELED"})
                self._jobs.pop(job_id)
            elif rt.stopping not in ("cancel", "success", "failed", "timeout", "shutdown"):
                self._stop_all(job, rt, "cancel", {"code": CODE_CANCELLED, "message": "CANCELED"})
                self._set_state(job, rt, CANCELLING)
            return job

    def preempt(self, job_id: str, replica: str | None) -> str:
        """Deliver what a Spot VM gets: SIGTERM now, SIGKILL after the grace period. Without a
        replica name, the last replica (the highest pool's) is hit. Returns its name."""
        with self._lock:
            entry = self._jobs.get(job_id)
            if entry and entry[0]["state"] in (QUEUED, PENDING) and not entry[1].stopping:
                raise NotYetRunning(f"job {job_id} is not running yet ({entry[0]['state']})")
            if entry is None or entry[0]["state"] != RUNNING or entry[1].stopping:
                state = (
                    entry[0]["state"] if entry else (self.store.get_job(job_id) or {}).get("state")
                )
                if state is None:
                    raise KeyError(job_id)
                raise ExecutorError(
                    400, "FAILED_PRECONDITION", f"job {job_id} is not running (state {state})"
                )
            job, rt = entry
            names = [r.name for r in rt.replicas]
            target = replica or names[-1]
            found = [r for r in rt.replicas if r.name == target]
            if not found:
                raise ExecutorError(
                    400,
                    "INVALID_ARGUMENT",
                    f"job {job_id} has no replica {target!r}; its replicas: {', '.join(names)}",
                )
            if found[0].status == "new":
                raise NotYetRunning(f"replica {target} is starting")
            if found[0].status != "running":
                raise ExecutorError(
                    400,
                    "FAILED_PRECONDITION",
                    f"replica {target} is not running ({found[0].status})",
                )
            self._preempt(job, rt, found[0], "requested")
            return target

    def active_counts(self) -> dict[str, int]:
        """Active jobs by state name, e.g. {"JOB_STATE_RUNNING": 2}."""
        with self._lock:
            counts: dict[str, int] = {}
            for job, _rt in self._jobs.values():
                counts[job["state"]] = counts.get(job["state"], 0) + 1
            return counts

    def delete(self, job_id: str) -> None:
        with self._lock:
            if job_id in self._jobs:
                raise ExecutorError(
                    400,
                    "FAILED_PRECONDITION",
                    f"job {job_id} is still {self._jobs[job_id][0]['state']}; cancel it first",
                )
            if self.store.get_job(job_id) is None:
                raise KeyError(job_id)
            self.store.delete_job(job_id)

    # -- the tick ------------------------------------------------------------------------------

    def _tick(self) -> None:
        for job_id, (job, rt) in list(self._jobs.items()):
            try:
                self._tick_job(job_id, job, rt)
            except Exception as exc:  # one broken job must not stop the supervision of others
                log.exception("executor failed on job %s", job_id)
                if rt.stopping is None:
                    error = {"code": CODE_INTERNAL, "message": f"local executor error: {exc}"}
                    self._stop_all(job, rt, "failed", error)

    def _tick_job(self, job_id: str, job: dict, rt: Runtime) -> None:
        if job["state"] == QUEUED:
            if self._fits(job_id, len(rt.replicas)):
                self._start_job(job, rt)
            return
        if job["state"] == PENDING and rt.stopping is None:
            self._start_job(job, rt)
        self._ingest_logs(job, rt)
        for replica in rt.replicas:
            if replica.status == "running":
                self._poll(job, rt, replica)
        self._timers(job, rt)
        if rt.stopping and not any(r.status == "running" for r in rt.replicas):
            self._finish_stop(job, rt)
        if job["state"] in TERMINAL_STATES:
            self._jobs.pop(job_id, None)

    def _fits(self, job_id: str, needed: int) -> bool:
        """FIFO admission: a job starts when it and every older queued job fit."""
        busy = sum(len(rt.replicas) for job, rt in self._jobs.values() if job["state"] != QUEUED)
        for other_id, (job, rt) in self._jobs.items():
            if other_id == job_id:
                return busy + needed <= self.max_replicas
            if job["state"] == QUEUED:
                busy += len(rt.replicas)
        return False

    def _start_job(self, job: dict, rt: Runtime) -> None:
        if job["state"] == QUEUED:
            self._set_state(job, rt, PENDING)
            rt.ports = self._ports(rt)
        for replica in rt.replicas:
            if replica.status == "new":
                try:
                    self._spawn(job, rt, replica)
                except (OSError, ValueError) as exc:  # no such cwd, a NUL in argv or env, ...
                    self._unstartable(job, rt, replica, exc)
                    return
        if rt.started_at is None:
            rt.started_at = time.time()
        self._set_state(job, rt, RUNNING)

    def _unstartable(self, job: dict, rt: Runtime, replica: Replica, exc: Exception) -> None:
        """A replica that cannot be started fails the job at once (stopping the replicas that
        did start): trying again would fail the same way, forever."""
        message = (
            f"The replica {replica.name} could not be started: {exc}. Check the pool's "
            f"command, args and env, and the directory `vtx local up` ran in ({self.cwd})."
        )
        self._service_log(job, rt, message)
        self._stop_all(job, rt, "failed", {"code": CODE_INVALID_ARGUMENT, "message": message})

    def _ports(self, rt: Runtime) -> dict[str, int]:
        """A free port per replica for this job attempt; the primary's is MASTER_PORT."""
        ports = {}
        socks = []
        for replica in rt.replicas:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)  # held open until all are chosen, so they differ
            ports[replica.name] = sock.getsockname()[1]
        for sock in socks:
            sock.close()
        return ports

    def _spawn(self, job: dict, rt: Runtime, replica: Replica) -> None:
        job_dir = self.data_dir / "jobs" / self._job_id(job)
        job_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{replica.name}.{replica.attempt}"
        replica.log_path = str(job_dir / f"{stem}.log")
        replica.exit_path = str(job_dir / f"{stem}.exit")
        Path(replica.exit_path).unlink(missing_ok=True)
        slot = vertex_env.ReplicaSlot(replica.pool, replica.index)
        argv = vertex_env.replica_command(vertex_env.pools(job)[replica.pool])
        env = vertex_env.replica_env(
            job, self._job_id(job), slot, rt.ports, self.project_number, self.gcs_endpoint
        )
        runner = [sys.executable, "-m", "jobs.local.replica_runner"]
        runner += ["--log", replica.log_path, "--exit", replica.exit_path, "--", *argv]
        proc = subprocess.Popen(
            runner, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self._procs[(self._job_id(job), replica.name, replica.attempt)] = proc
        replica.pid = proc.pid
        try:
            replica.create_time = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            replica.create_time = None
        replica.status, replica.exit_code = "running", None
        replica.term_at, replica.killed, replica.preempted = None, False, False
        self._service_log(job, rt, f"{replica.name} started (attempt {replica.attempt})")
        self._persist(job, rt)

    # -- replicas ------------------------------------------------------------------------------

    def _poll(self, job: dict, rt: Runtime, replica: Replica) -> None:
        proc = self._procs.get((self._job_id(job), replica.name, replica.attempt))
        if proc is not None:
            if proc.poll() is None:
                return
            self._procs.pop((self._job_id(job), replica.name, replica.attempt))
        elif self._alive(replica):
            return
        code = self._read_exit(replica)
        replica.status, replica.exit_code = "exited", code
        self._drain(job, rt, replica)
        how = "was lost (no exit recorded)" if code is None else f"exited with code {code}"
        self._service_log(job, rt, f"{replica.name} {how}")
        self._on_exit(job, rt, replica, code)
        self._persist(job, rt)

    @staticmethod
    def _alive(replica: Replica) -> bool:
        if replica.pid is None:
            return False
        try:
            proc = psutil.Process(replica.pid)
            same = (
                replica.create_time is None or abs(proc.create_time() - replica.create_time) < 0.5
            )
            return same and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    @staticmethod
    def _read_exit(replica: Replica) -> int | None:
        try:
            return int(json.loads(Path(replica.exit_path or "").read_text())["exit_code"])
        except (FileNotFoundError, ValueError, KeyError):
            # The runner died without a record: our SIGKILL, our SIGTERM arriving before its
            # handler was installed (a replica stopped while starting), or a lost "machine".
            if replica.killed:
                return SIGKILL_EXIT_CODE
            return SIGTERM_EXIT_CODE if replica.term_at is not None else None

    def _on_exit(self, job: dict, rt: Runtime, replica: Replica, code: int | None) -> None:
        if rt.stopping:
            return  # everything is being stopped already; the outcome is decided
        now = time.time()
        in_window = rt.preemption_until is not None and now <= rt.preemption_until
        if code == 0 and replica.name == "workerpool0-0":
            self._stop_all(job, rt, "success")
        elif code == 0:
            return  # a worker finished; the job goes on until the primary exits
        elif code is None or replica.preempted or in_window:
            if replica.preempted:  # the preempted replica is down: others follow within grace
                rt.preemption_until = max(rt.preemption_until or now, now + self.grace_s)
            elif not in_window:  # an infrastructure loss opens a window of its own
                rt.preemption_until = now + 2 * self.grace_s
            self._restart_after_loss(job, rt, replica)
        elif code in CRASH_EXIT_CODES and self._may_retry_job(job, rt):
            rt.job_retries += 1
            self._service_log(job, rt, f"{replica.name} crashed ({code}); retrying the job")
            self._stop_all(job, rt, "restart")
        else:
            message = (
                f"The replica {replica.name} exited with a non-zero status of {code}. "
                f"Termination reason: Error. To find out more about why your job exited please "
                f"check the logs: vtx logs {job['name']} --stack local"
            )
            self._stop_all(job, rt, "failed", {"code": CODE_INVALID_ARGUMENT, "message": message})

    def _may_retry_job(self, job: dict, rt: Runtime) -> bool:
        scheduling = job.get("jobSpec", {}).get("scheduling", {})
        return not scheduling.get("disableRetries", False) and rt.job_retries < JOB_RETRY_LIMIT

    def _restart_after_loss(self, job: dict, rt: Runtime, replica: Replica) -> None:
        if replica.restarts >= WORKER_RESTART_LIMIT:
            if self._may_retry_job(job, rt):
                rt.job_retries += 1
                for other in rt.replicas:
                    other.restarts = 0
                self._service_log(job, rt, f"{replica.name} restarted too often; retrying the job")
                self._stop_all(job, rt, "restart")
            else:
                message = (
                    f"The replica {replica.name} was lost {WORKER_RESTART_LIMIT + 1} times "
                    f"(preemption or infrastructure) and the job was retried {rt.job_retries} "
                    f"times; giving up."
                )
                self._stop_all(job, rt, "failed", {"code": CODE_UNAVAILABLE, "message": message})
            return
        replica.restarts += 1
        scheduling = job.get("jobSpec", {}).get("scheduling", {})
        if scheduling.get("restartJobOnWorkerRestart", False):
            self._service_log(job, rt, f"{replica.name} lost; restarting every replica")
            self._stop_all(job, rt, "restart")
            return
        replica.attempt += 1
        self._service_log(job, rt, f"{replica.name} lost; restarting it")
        self._spawn(job, rt, replica)

    def _preempt(self, job: dict, rt: Runtime, replica: Replica, why: str) -> None:
        replica.preempted = True
        rt.preemption_until = time.time() + 2 * self.grace_s
        self._service_log(
            job,
            rt,
            f"preempting {replica.name} ({why}): SIGTERM now, SIGKILL in {self.grace_s:g} s",
        )
        self._signal(replica, signal.SIGTERM)
        self._persist(job, rt)

    def _signal(self, replica: Replica, sig: signal.Signals) -> None:
        if sig == signal.SIGTERM and replica.term_at is None:
            replica.term_at = time.time()
        if sig == signal.SIGKILL:
            replica.killed = True
        if replica.pid is None or not self._alive(replica):
            return
        try:
            os.killpg(replica.pid, sig)  # the runner leads the replica's group
        except ProcessLookupError:
            return

    def _stop_all(self, job: dict, rt: Runtime, reason: str, error: dict | None = None) -> None:
        rt.stopping, rt.final_error = reason, error
        for replica in rt.replicas:
            if replica.status == "running":
                self._signal(replica, signal.SIGTERM)
        self._persist(job, rt)

    def _timers(self, job: dict, rt: Runtime) -> None:
        now = time.time()
        for replica in rt.replicas:
            overdue = replica.term_at is not None and now >= replica.term_at + self.grace_s
            if replica.status == "running" and overdue and not replica.killed:
                self._service_log(job, rt, f"{replica.name} still running after grace: SIGKILL")
                self._signal(replica, signal.SIGKILL)
                self._persist(job, rt)
        if rt.stopping or rt.started_at is None:
            return
        timeout_s = _duration_s(job.get("jobSpec", {}).get("scheduling", {}).get("timeout"))
        if timeout_s is not None and now - rt.started_at > timeout_s:
            message = f"The job ran longer than its timeout of {timeout_s:g} s and was stopped."
            self._stop_all(job, rt, "timeout", {"code": CODE_DEADLINE_EXCEEDED, "message": message})
            return
        if rt.chaos_next < len(rt.chaos) and now - rt.started_at >= rt.chaos[rt.chaos_next][0]:
            target = rt.replicas[rt.chaos[rt.chaos_next][1]]
            rt.chaos_next += 1
            in_window = rt.preemption_until is not None and now <= rt.preemption_until
            if target.status == "running" and not in_window:
                self._preempt(job, rt, target, "chaos")
            self._persist(job, rt)

    def _finish_stop(self, job: dict, rt: Runtime) -> None:
        reason, error = rt.stopping, rt.final_error
        rt.stopping, rt.final_error = None, None
        if reason == "restart":
            rt.job_attempt += 1
            rt.ports = self._ports(rt)
            rt.preemption_until = None
            for replica in rt.replicas:
                replica.attempt += 1
                replica.status = "new"
            self._service_log(job, rt, f"restarting the job (job attempt {rt.job_attempt})")
            for replica in rt.replicas:
                self._spawn(job, rt, replica)
            return
        state = {"success": SUCCEEDED, "cancel": CANCELLED}.get(reason or "", FAILED)
        self._set_state(job, rt, state, error)
        self._service_log(job, rt, f"job {state.removeprefix('JOB_STATE_').lower()}")

    # -- chaos ---------------------------------------------------------------------------------

    def _chaos_schedule(self, job: dict, replicas: int) -> list[tuple[float, int]]:
        """Seeded Poisson preemptions for Spot jobs: (seconds after start, replica index).

        Drawn once at submission so a drill with the same seed and job shape preempts the same
        replicas at the same offsets."""
        scheduling = job.get("jobSpec", {}).get("scheduling", {})
        if scheduling.get("strategy") != "SPOT":
            return []
        labels = job.get("labels", {})
        try:
            rate = float(labels.get(CHAOS_RATE_LABEL, self.chaos_per_hour))
            seed = int(labels.get(CHAOS_SEED_LABEL, self.chaos_seed))
        except ValueError:
            rate, seed = math.nan, 0
        if not math.isfinite(rate):
            raise ExecutorError(
                400,
                "INVALID_ARGUMENT",
                f"labels {CHAOS_RATE_LABEL} and {CHAOS_SEED_LABEL} must be whole numbers "
                f'(preemptions per replica-hour, and a seed), e.g. {CHAOS_RATE_LABEL}: "2"',
            )
        if rate <= 0:
            return []
        rng = random.Random(seed)
        horizon_s = _duration_s(scheduling.get("timeout")) or 7 * 24 * 3600.0
        schedule, at = [], 0.0
        while len(schedule) < 1000:
            at += rng.expovariate(rate * replicas / 3600.0)
            if at > horizon_s:
                break
            schedule.append((at, rng.randrange(replicas)))
        return schedule

    # -- logs and state --------------------------------------------------------------------

    def _ingest_logs(self, job: dict, rt: Runtime) -> None:
        for replica in rt.replicas:
            if replica.status == "running":
                self._drain(job, rt, replica)

    def _drain(self, job: dict, rt: Runtime, replica: Replica) -> None:
        path = replica.log_path
        if path is None:
            return
        offset = self._offsets.get(path)
        if offset is None:
            offset = self.store.log_offset(path)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # only whole lines; the rest is still being written
        if end == 0:
            return
        lines = []
        for raw in data[:end].splitlines():
            try:
                item = json.loads(raw)
                lines.append((item["ts"], item["m"]))
            except (ValueError, KeyError):
                lines.append((now_rfc3339(), raw.decode("utf-8", errors="replace")))
        self._offsets[path] = offset + end
        self.store.add_log_lines(
            path,
            offset + end,
            self._job_id(job),
            _run_id(job),
            replica.name,
            replica.attempt,
            lines,
        )

    def _service_log(self, job: dict, rt: Runtime, message: str) -> None:
        """Platform events, shown in `vtx logs` like Vertex's own service entries."""
        log.info("%s: %s", self._job_id(job), message)
        self.store.add_log_lines(
            None,
            0,
            self._job_id(job),
            _run_id(job),
            "service",
            rt.job_attempt,
            [(now_rfc3339(), message)],
        )

    def _set_state(self, job: dict, rt: Runtime, state: str, error: dict | None = None) -> None:
        stamp = now_rfc3339()
        job["state"] = state
        job["updateTime"] = stamp
        if state == RUNNING and "startTime" not in job:
            job["startTime"] = stamp
        if state in TERMINAL_STATES:
            job["endTime"] = stamp
        if error is not None:
            job["error"] = error
        self._persist(job, rt)

    def _persist(self, job: dict, rt: Runtime) -> None:
        self.store.put_job(self._job_id(job), job, rt.model_dump(mode="json"))

    @staticmethod
    def _job_id(job: dict) -> str:
        return job["name"].rsplit("/", 1)[1]


def _run_id(job: dict) -> str | None:
    return job.get("labels", {}).get("vtx-run-id")


def _duration_s(value: str | None) -> float | None:
    """A protobuf Duration in JSON form ("3600s", "1.5s") in seconds."""
    if not value:
        return None
    seconds = float(value.rstrip("s"))
    return seconds if math.isfinite(seconds) and seconds > 0 else None
