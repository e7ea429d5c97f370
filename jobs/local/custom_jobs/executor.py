"""The process executor: runs CustomJob replicas as local process groups.

One thread ticks every ``TICK_S`` over the active jobs, under the lock requests take: admits
QUEUED jobs when replicas are free, polls replicas, enforces grace periods and delivers
preemptions (asked for or seeded chaos). Between ticks, outside that lock, it has a bounded part
of each replica's new log lines copied into the store (jobs/local/custom_jobs/log_copier.py), and
ticks again at once while some replica's lines wait; a job ends once its replicas' lines are
all copied. What an exit, a preemption, a timeout or a cancel means for the job is decided by
the pure functions of jobs/local/custom_jobs/lifecycle.py; this module only starts, signals and
reaps processes and records what was decided. Everything it must remember across a
control-plane crash lives in the job's runtime record (jobs/local/custom_jobs/runtime.py) in
SQLite; replicas run in sessions of their own and write their exit code to a file, so a
restarted executor re-attaches to them.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from jobs.core.contract import region_of
from jobs.core.formats import now_rfc3339
from jobs.core.states import JobState
from jobs.local.custom_jobs import lifecycle, stalls
from jobs.local.custom_jobs.job import JobView
from jobs.local.custom_jobs.lifecycle import (
    ACTIVE_STATES,
    CANCELED,
    PLATFORM_STOPPED,
    PRIMARY,
    Action,
    CancelAction,
    Decision,
    Preemptable,
    ReplicaStatus,
    ShutdownAction,
    StopReason,
)
from jobs.local.custom_jobs.log_copier import LogCopier, Source
from jobs.local.custom_jobs.runtime import Replica, Runtime
from jobs.local.custom_jobs.web_access import web_access_uris
from jobs.local.platform import capacity, vertex_env
from jobs.local.platform.capacity import Admission, AdmissionDecision, Capacity, Need
from jobs.local.platform.rpc_status import Code, JobError
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_ports

log = logging.getLogger(__name__)

TICK_S = 0.2


def project_of(name: str) -> str:
    """The project number of a resource name (the server names jobs by number)."""
    return name.split("/")[1]


class ExecutorError(Exception):
    """A request the executor refuses; ``status`` is the google.rpc status name."""

    def __init__(self, http_code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.http_code, self.status, self.message = http_code, status, message


class NotYetRunning(ExecutorError):
    """The job or replica asked for will run but does not yet (QUEUED, PENDING, starting)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "FAILED_PRECONDITION", message)


class PreemptionInProgress(ExecutorError):
    """A preemption asked for while the job still goes through the last one, or restarts
    (ABORTED, 409: try again later, as Google's APIs say of a conflict)."""

    def __init__(self, job_id: str, rt: Runtime, now: float) -> None:
        if rt.preemption_until is not None and rt.preemption_until >= now:
            what = (
                f"the preemption of {rt.preempted_replica}"
                if rt.preempted_replica
                else "a replica's loss"
            )
            wait_s = math.ceil(rt.preemption_until - now)
            message = (
                f"job {job_id} is still going through {what}: its replicas' exits for the next "
                f"{wait_s} s belong to it, so another preemption now would be folded into it; "
                f"nothing was done, try again in {wait_s} s"
            )
        else:
            message = f"job {job_id} is restarting; nothing was done, try again once it runs"
        super().__init__(409, "ABORTED", message)


class PoolHooks(Protocol):
    """What the persistent resources service (persistent_resources.py) tells the executor:
    whether a job that names a resource may be created, whether it may start now, and what
    the resources hold of the capacity model."""

    def refusal(self, job: dict) -> str | None: ...

    def admission(self, job: dict, running: list[dict]) -> AdmissionDecision | None: ...

    def reserved(self, for_quota: bool = False) -> list[Need]: ...


@dataclass
class ActiveJob:
    """A job the executor supervises: its REST record (stored and served), the typed view of
    it, and the executor's runtime record."""

    resource: dict
    view: JobView
    rt: Runtime

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def state(self) -> JobState:
        return JobState(self.resource["state"])


class Executor:
    def __init__(self, store: Store, settings: LocalSettings) -> None:
        self.store = store
        self.settings = settings
        self._jobs: dict[str, ActiveJob] = {}
        self._capacity = settings.capacity
        self._needs: dict[str, Need] = {}
        """Job id -> what it asks of its region, read once from its REST form."""
        self._procs: dict[tuple[str, str, int], subprocess.Popen[bytes]] = {}
        self._logs = LogCopier(store)
        self._lock = threading.RLock()
        self.pools: PoolHooks | None = None
        """Set by the server once the persistent resources service exists."""
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vtx-executor", daemon=True)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._reattach()
        self._thread.start()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop every running replica (SIGTERM, grace, SIGKILL) and fail their jobs."""
        with self._lock:
            for job in list(self._jobs.values()):
                action = lifecycle.on_shutdown(job.state, job.rt.stopping)
                if action is ShutdownAction.FAIL_NOW:
                    self._set_state(job, JobState.FAILED, PLATFORM_STOPPED)
                    self._jobs.pop(job.id)
                    self._needs.pop(job.id, None)
                elif action is ShutdownAction.STOP:
                    self._stop_all(job, StopReason.SHUTDOWN, PLATFORM_STOPPED)
        deadline = time.monotonic() + (timeout_s or self.settings.grace_s + 10)
        while time.monotonic() < deadline:
            with self._lock:
                if not self._jobs:
                    break
            time.sleep(TICK_S)
        self._halt.set()
        self._thread.join(timeout=5)

    def _reattach(self) -> None:
        for resource, raw in self.store.active_jobs(ACTIVE_STATES):
            job = ActiveJob(resource, JobView.of(resource), Runtime.model_validate(raw))
            self._jobs[job.id] = job
            self._follow_logs(job)
            live = sum(1 for r in job.rt.replicas if r.running)
            if job.state is not JobState.QUEUED:
                self._service_log(job, f"control plane restarted; re-attached to {live} replicas")
                self._persist(job)

    def _loop(self) -> None:
        while not self._halt.is_set():
            behind = False
            try:
                with self._lock:
                    self._tick()
                behind = self._logs.copy_round()  # outside the lock: requests answer meanwhile
            except Exception:  # keep supervising the other jobs; the failure is in the log
                log.exception("executor tick failed")
            if not behind:
                self._halt.wait(TICK_S)

    # -- requests ------------------------------------------------------------------------------

    def check_fits(self, job: dict) -> None:
        """Refuse replica counts this platform cannot run, before anything is built from them:
        a count is data, not a loop bound, until it is known to fit (the server asks first,
        before validation; submit asks again for callers that skip the server)."""
        counts = vertex_env.replica_counts(job)
        hosts = vertex_env.host_counts(job) if all(n >= 0 for n in counts) else counts
        for i, count in enumerate(counts):
            if count < 0:
                raise ExecutorError(
                    400,
                    "INVALID_ARGUMENT",
                    f"jobSpec.workerPoolSpecs[{i}].replicaCount: {count} is negative; "
                    f"write 1 or more",
                )
        limit = self.settings.max_replicas
        if sum(hosts) > limit:  # a TPU slice runs a process per host
            raise ExecutorError(
                429,
                "RESOURCE_EXHAUSTED",
                f"the job needs {sum(hosts)} replicas but this local platform runs at most "
                f"{limit} at once; lower replicaCount or restart it with "
                f"`vtx local up --max-replicas N`",
            )

    def submit(self, resource: dict, env: dict[str, str] | None = None) -> dict:
        """Accept a new job (already validated and named): QUEUED until replicas are free.
        ``env``: variables every replica gets beside Vertex's (a trial's)."""
        self.check_fits(resource)
        counts = vertex_env.replica_counts(resource)
        if counts[:1] != [1]:
            # Nothing would run, or the primary would not be the one replica whose exit ends
            # the job: accepted, it would stay RUNNING forever (Vertex refuses it too).
            count = counts[0] if counts else 0
            raise ExecutorError(
                400,
                "INVALID_ARGUMENT",
                f"jobSpec.workerPoolSpecs[0].replicaCount: the primary pool runs exactly 1 "
                f"replica, not {count}; write replicaCount: 1 (and put more replicas in "
                f"workerPoolSpecs[1])",
            )
        view = JobView.of(resource)
        slots = view.slots
        rt = Runtime(
            replicas=[Replica(name=s.name, pool=s.pool, index=s.index) for s in slots],
            env=dict(env or {}),
        )
        try:
            rt.chaos = lifecycle.chaos_schedule(
                view.scheduling,
                view.labels,
                len(slots),
                self.settings.chaos_per_hour,
                self.settings.chaos_seed,
            )
        except lifecycle.ChaosLabelError as exc:
            raise ExecutorError(400, "INVALID_ARGUMENT", str(exc)) from exc
        need = capacity.need_of(resource, region_of(view.name))
        with self._lock:
            refusal = self.pools.refusal(resource) if self.pools else None
            if refusal:
                raise ExecutorError(400, "INVALID_ARGUMENT", refusal)
            self._check_quota(need)  # under the lock: two creates cannot both take the last unit
            self._needs[view.id] = need
            resource["state"] = JobState.QUEUED.value
            resource["createTime"] = resource["updateTime"] = now_rfc3339()
            job = ActiveJob(resource, view, rt)
            self._jobs[job.id] = job
            self._persist(job)
            self._service_log(job, f"job accepted: {len(slots)} replica(s)")
            # The answer is rendered outside the lock while the supervisor's tick changes the
            # job: a copy taken under it, never the live dict.
            return copy.deepcopy(resource)

    def _check_quota(self, need: Need) -> None:
        """Vertex's 429 for a create the region's quota cannot take beside its active jobs."""
        in_use = capacity.quota_in_use(self.quota_holders(), need.region)
        short = capacity.quota_shortfalls(self._capacity, need, in_use)
        if short:
            message = capacity.quota_message(short, need.region)
            raise ExecutorError(429, "RESOURCE_EXHAUSTED", message)

    @property
    def lock(self) -> threading.RLock:
        """The lock every change of a job is made under; the persistent resources service
        takes it too, so that a resource and the jobs on it change together."""
        return self._lock

    def job_needs(self) -> list[Need]:
        """Every active job's needs (quota is held from a job's create to its end)."""
        return [self._need(j) for j in self._jobs.values()]

    def quota_holders(self) -> list[Need]:
        """Needs holding quota: every active job's, and the persistent resources'."""
        reserved = self.pools.reserved(for_quota=True) if self.pools else []
        return self.job_needs() + reserved

    def started_needs(self) -> list[Need]:
        """Needs holding accelerators: the started jobs' and the persistent resources'."""
        reserved = self.pools.reserved() if self.pools else []
        return [self._need(j) for j in self._jobs.values() if self._holds_capacity(j)] + reserved

    def started_jobs(self) -> list[dict]:
        """The REST form of every job that holds its machines (started, not ended)."""
        return [j.resource for j in self._jobs.values() if self._holds_capacity(j)]

    def _need(self, job: ActiveJob) -> Need:
        if job.id not in self._needs:  # re-attached after a crash: read it again
            self._needs[job.id] = capacity.need_of(job.resource, region_of(job.view.name))
        return self._needs[job.id]

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def set_capacity(self, new: Capacity) -> None:
        """Replace the capacity model at run time: waiting jobs see it at the next tick; jobs
        already created or started keep what they hold."""
        with self._lock:
            self._capacity = new

    def capacity_in_use(self) -> dict[str, dict]:
        """Per region: quota units the active jobs hold, accelerators the started ones hold."""
        with self._lock:
            needs = self.quota_holders()
            started = self.started_needs()
        regions = sorted({n.region for n in needs})
        return {
            region: {
                "quotas": capacity.quota_in_use(needs, region),
                "accelerators": {
                    f"{name} {kind}": count
                    for (name, kind), count in sorted(capacity.held(started, region).items())
                },
            }
            for region in regions
        }

    def cancel(self, job_id: str) -> JobState | None:
        """Cancel an active job; the state it was in when asked, read and acted on under the
        lock (a final state: it had ended and nothing was done; None: no such job), so a
        caller racing a delete or the job's end answers from what happened, not from an
        earlier read."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                resource = self.store.get_job(job_id)
                return JobState(resource["state"]) if resource is not None else None
            was = job.state
            action = lifecycle.on_cancel(job.state, job.rt.stopping)
            if action is CancelAction.CANCEL_NOW:
                self._set_state(job, JobState.CANCELLED, CANCELED)
                self._jobs.pop(job_id)
                self._needs.pop(job_id, None)
            elif action is CancelAction.STOP:
                self._stop_all(job, StopReason.CANCEL, CANCELED)
                self._set_state(job, JobState.CANCELLING)
            return was

    def _running_job(self, job_id: str) -> ActiveJob:
        """The job's runtime, held by the executor while it runs (under ``self._lock``)."""
        job = self._jobs.get(job_id)
        if job is not None:
            return job
        state = (self.store.get_job(job_id) or {}).get("state")
        if state is None:
            raise KeyError(job_id)
        raise ExecutorError(
            400, "FAILED_PRECONDITION", f"job {job_id} is not running (state {state})"
        )

    def hinder(self, job_id: str, replica: str | None, factor: float | None) -> str:
        """Stall a running replica (``factor`` None: SIGSTOP to its processes, left alive) or
        slow it down ``factor`` times (`jobs.local.custom_jobs.stalls`); the last replica without
        a name, as a preemption. Returns its name."""
        with self._lock:
            job = self._running_job(job_id)
            target = self._preempt_target(job, replica)
            if job.state is not JobState.RUNNING or not target.running or target.pid is None:
                raise NotYetRunning(f"replica {target.name} of job {job_id} is not running yet")
            if job.rt.stopping is not None or target.term_at is not None:
                raise ExecutorError(
                    400, "FAILED_PRECONDITION", f"replica {target.name} is being stopped"
                )
            self._let_go(target)
            if factor is None:
                target.hindered = "stalled"
                count = stalls.signal_processes(target.pid, signal.SIGSTOP)
                said = f"stalling {target.name}: SIGSTOP to its {count} processes (alive, no steps)"
            else:
                target.hindered = f"slowed x{factor:g}"
                pid, mark = target.pid, target.hindered

                def still() -> bool:
                    return target.hindered == mark and target.pid == pid and target.running

                stalls.SlowDown(pid, factor, self._lock, still).start()
                said = f"slowing {target.name} down {factor:g} times (SIGSTOP/SIGCONT each second)"
            self._service_log(job, said)
            self._persist(job)
            return target.name

    def _let_go(self, replica: Replica) -> None:
        """A stalled or slowed replica running again (its duty cycle ends at its next check)."""
        if replica.hindered is not None and replica.pid is not None:
            replica.hindered = None
            stalls.signal_processes(replica.pid, signal.SIGCONT)

    def preempt(self, job_id: str, replica: str | None) -> str:
        """Deliver what a Spot VM gets: SIGTERM now, SIGKILL after the grace period. Without a
        replica name, the last replica (the highest pool's) is hit. Returns its name."""
        with self._lock:
            job = self._running_job(job_id)
            target = self._preempt_target(job, replica)  # a wrong name is said first
            self._check_preemptable(job)
            ready = lifecycle.replica_preemptable(target.status)
            if ready is Preemptable.NOT_YET:
                raise NotYetRunning(f"replica {target.name} is starting")
            if ready is Preemptable.NO:
                raise ExecutorError(
                    400,
                    "FAILED_PRECONDITION",
                    f"replica {target.name} is not running ({target.status})",
                )
            self._preempt(job, target, "requested")
            return target.name

    @staticmethod
    def _preempt_target(job: ActiveJob, replica: str | None) -> Replica:
        names = [r.name for r in job.rt.replicas]
        target = replica or names[-1]
        for candidate in job.rt.replicas:
            if candidate.name == target:
                return candidate
        raise ExecutorError(
            400,
            "INVALID_ARGUMENT",
            f"job {job.id} has no replica {target!r}; its replicas: {', '.join(names)}",
        )

    @staticmethod
    def _check_preemptable(job: ActiveJob) -> None:
        now = time.time()
        ready = lifecycle.job_preemptable(
            job.state,
            job.rt.stopping,
            in_window=lifecycle.in_window(job.rt.preemption_until, now),
        )
        if ready is Preemptable.NOT_YET:
            raise NotYetRunning(f"job {job.id} is not running yet ({job.state})")
        if ready is Preemptable.BUSY:
            raise PreemptionInProgress(job.id, job.rt, now)
        if ready is Preemptable.NO:
            raise ExecutorError(
                400, "FAILED_PRECONDITION", f"job {job.id} is not running (state {job.state})"
            )

    def active_counts(self) -> dict[str, int]:
        """Active jobs by state name, e.g. {"JOB_STATE_RUNNING": 2}."""
        with self._lock:
            counts: dict[str, int] = {}
            for job in self._jobs.values():
                counts[job.state.value] = counts.get(job.state.value, 0) + 1
            return counts

    def delete(self, job_id: str) -> bool:
        """Delete an ended job; False when there was none (deleted meanwhile)."""
        with self._lock:
            if job_id in self._jobs:
                raise ExecutorError(
                    400,
                    "FAILED_PRECONDITION",
                    f"job {job_id} is still {self._jobs[job_id].state}; cancel it first",
                )
            return self.store.delete_job(job_id)

    # -- the tick ------------------------------------------------------------------------------

    def _tick(self) -> None:
        for job in list(self._jobs.values()):
            try:
                self._tick_job(job)
            except Exception as exc:  # one broken job must not stop the supervision of others
                log.exception("executor failed on job %s", job.id)
                if job.rt.stopping is None:
                    error = JobError(Code.INTERNAL, f"local executor error: {exc}")
                    self._stop_all(job, StopReason.FAILED, error)

    def _tick_job(self, job: ActiveJob) -> None:
        if job.state is JobState.QUEUED:
            if self._fits(job):
                self._start_job(job)
            else:
                self._say_queued(job)
            return
        if job.state is JobState.PENDING and job.rt.stopping is None:
            if job.rt.started_at is None and not self._admitted(job):
                return
            self._start_job(job)
        for replica in job.rt.replicas:
            if replica.running:
                self._poll(job, replica)
        self._timers(job)
        if job.rt.stopping and not any(r.running for r in job.rt.replicas):
            self._finish_stop(job, job.rt.stopping)
        if job.state.final:
            self._jobs.pop(job.id, None)
            self._needs.pop(job.id, None)

    def _fits(self, job: ActiveJob) -> bool:
        queue = [(other.state, len(other.rt.replicas)) for other in self._jobs.values()]
        position = list(self._jobs).index(job.id)
        return lifecycle.admits(queue, position, self.settings.max_replicas)

    def _say_queued(self, job: ActiveJob) -> None:
        """Say in the job's service log why it waits and where it stands, whenever its place
        changes: one user's many jobs must not hold everyone else's without a word."""
        queue = [(other.state, len(other.rt.replicas)) for other in self._jobs.values()]
        wait = lifecycle.queue_wait(queue, list(self._jobs).index(job.id))
        if wait.position != job.rt.queue_position:
            job.rt.queue_position = wait.position
            self._service_log(job, wait.note(self.settings.max_replicas))
            self._persist(job)

    @staticmethod
    def _holds_capacity(job: ActiveJob) -> bool:
        """A job holds its accelerators from its first start to its end (restarts included)."""
        return job.rt.started_at is not None

    def _admitted(self, job: ActiveJob) -> bool:
        """Whether a PENDING job's accelerators are free (capacity.admit); a job that waits
        says why once, and one that cannot get them (Spot stockout, FLEX_START past its
        maxWaitDuration) fails."""
        need, now = self._need(job), time.time()
        on_pool = self.pools.admission(job.resource, self.started_jobs()) if self.pools else None
        decision = on_pool or capacity.admit(
            self._capacity,
            need,
            capacity.held(self.started_needs(), need.region),
            waited_s=now - (job.rt.waiting_since or now),
            default_max_wait_s=capacity.default_max_wait_s(),
        )
        if decision.admission is Admission.START:
            if job.rt.waiting_since is not None:
                self._service_log(job, "resources are available: starting")
            job.rt.waiting_since = None
            return True
        if decision.admission is Admission.FAIL:
            self._service_log(job, decision.note or "failed")
            self._set_state(job, JobState.FAILED, decision.error)
            self._service_log(job, f"job {JobState.FAILED.short}")
            return False
        if job.rt.waiting_since is None:
            job.rt.waiting_since = now
            self._service_log(job, decision.note or "waiting for resources")
            self._persist(job)
        return False

    def _start_job(self, job: ActiveJob) -> None:
        if job.state is JobState.QUEUED:
            self._set_state(job, JobState.PENDING)
            if not self._admitted(job):
                return
        if not job.rt.replicas:  # recorded before submit refused such jobs: it cannot run
            message = "The job has no replica to run: workerPoolSpecs[0].replicaCount must be 1."
            self._set_state(job, JobState.FAILED, JobError(Code.INVALID_ARGUMENT, message))
            return
        if not job.rt.ports:  # chosen once the job may start: a wait can be long
            job.rt.ports = self._ports(job.rt)
        for replica in job.rt.replicas:
            if replica.status is ReplicaStatus.NEW:
                try:
                    self._spawn(job, replica)
                except (OSError, ValueError) as exc:  # no such cwd, a NUL in argv or env, ...
                    self._unstartable(job, replica, exc)
                    return
        if job.rt.started_at is None:
            job.rt.started_at = time.time()
            for note in vertex_env.accelerator_notes(job.resource):
                self._service_log(job, note)
        # Vertex fills webAccessUris once the nodes exist, i.e. as the job runs.
        uris = web_access_uris(job.resource, job.id, self.settings.port)
        if uris:
            job.resource["webAccessUris"] = uris
        self._set_state(job, JobState.RUNNING)

    def _unstartable(self, job: ActiveJob, replica: Replica, exc: Exception) -> None:
        """A replica that cannot be started fails the job at once (stopping the replicas that
        did start): trying again would fail the same way, forever."""
        message = (
            f"The replica {replica.name} could not be started: {exc}. Check the pool's "
            f"command, args and env, and the directory `vtx local up` ran in "
            f"({self.settings.cwd})."
        )
        self._service_log(job, message)
        self._stop_all(job, StopReason.FAILED, JobError(Code.INVALID_ARGUMENT, message))

    @staticmethod
    def _ports(rt: Runtime) -> dict[str, int]:
        """A free port per replica for this run of them all; the primary's is MASTER_PORT."""
        ports = free_ports(len(rt.replicas))
        return {replica.name: port for replica, port in zip(rt.replicas, ports, strict=True)}

    def _job_dir(self, job_id: str) -> Path:
        return self.settings.data_dir / "jobs" / job_id

    def _replica_file(self, job_id: str, replica: Replica, restart: int, suffix: str) -> str:
        """The log or exit file of the replica's ``restart``."""
        return str(self._job_dir(job_id) / f"{replica.name}.{restart}.{suffix}")

    def _spawn(self, job: ActiveJob, replica: Replica) -> None:
        job_dir = self._job_dir(job.id)
        job_dir.mkdir(parents=True, exist_ok=True)
        replica.log_path = self._replica_file(job.id, replica, replica.restart, "log")
        replica.exit_path = self._replica_file(job.id, replica, replica.restart, "exit")
        Path(replica.exit_path).unlink(missing_ok=True)
        slot = vertex_env.ReplicaSlot(replica.pool, replica.index)
        env = vertex_env.replica_env(
            job.resource,
            job.id,
            slot,
            job.rt.ports,
            project_of(job.resource["name"]),
            self.settings.gcs_endpoint,
            platform_env=job.rt.env,
        )
        runner = [sys.executable, "-m", "jobs.local.custom_jobs.replica_runner"]
        runner += ["--log", replica.log_path, "--exit", replica.exit_path, "--"]
        proc = subprocess.Popen(
            [*runner, *job.view.command(slot, job_dir / "packages" / replica.name)],
            cwd=self.settings.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._procs[(job.id, replica.name, replica.restart)] = proc
        self._logs.follow(self._log_source(job, replica, replica.restart))
        replica.pid = proc.pid
        try:
            replica.create_time = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            replica.create_time = None
        replica.status, replica.exit_code = ReplicaStatus.RUNNING, None
        replica.term_at, replica.killed, replica.preempted = None, False, False
        replica.hindered = None
        started = f"restarted (restart {replica.restart})" if replica.restart else "started"
        self._service_log(job, f"{replica.name} {started}")
        self._persist(job)

    # -- replicas ------------------------------------------------------------------------------

    def _poll(self, job: ActiveJob, replica: Replica) -> None:
        key = (job.id, replica.name, replica.restart)
        proc = self._procs.get(key)
        if proc is not None:
            if proc.poll() is None:
                return
            self._procs.pop(key)
        elif self._alive(replica):
            return
        if self._logs.end(replica.log_path):
            return  # its exit is logged at the next tick, after a copy round took its last lines
        code = self._read_exit(replica)
        replica.status, replica.exit_code = ReplicaStatus.EXITED, code
        how = "was lost (no exit recorded)" if code is None else f"exited with code {code}"
        self._service_log(job, f"{replica.name} {how}")
        self._on_exit(job, replica, code)
        self._persist(job)

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
            return lifecycle.unrecorded_exit(
                killed=replica.killed, terminated=replica.term_at is not None
            )

    def _on_exit(self, job: ActiveJob, replica: Replica, code: int | None) -> None:
        rt = job.rt
        if rt.stopping:
            return  # everything is being stopped already; the outcome is decided
        now = time.time()
        in_window = lifecycle.in_window(rt.preemption_until, now)
        kind = lifecycle.classify_exit(
            code, primary=replica.name == PRIMARY, preempted=replica.preempted, in_window=in_window
        )
        cause = lifecycle.loss_cause(
            replica.name,
            preempted=replica.preempted,
            in_window=in_window,
            last_preempted=rt.preempted_replica,
        )
        if kind is lifecycle.ReplicaExit.LOST:
            rt.preemption_until = lifecycle.window_after_loss(
                rt.preemption_until, now, preempted=replica.preempted, grace_s=self.settings.grace_s
            )
            rt.preempted_replica = cause  # a loss of its own opens a window no preemption owns
        decision = lifecycle.on_exit(
            kind,
            code=code,
            replica=replica.name,
            restarts=replica.restarts_counted,
            job_retries=rt.retries,
            scheduling=job.view.scheduling,
            job_name=job.view.name,
            preempted=cause,
        )
        if kind is lifecycle.ReplicaExit.LOST:
            decision = self._unless_stocked_out(job, decision)
        self._apply(job, replica, decision)

    def _unless_stocked_out(self, job: ActiveJob, decision: Decision) -> Decision:
        """A lost Spot replica comes back only where Spot capacity is left to restart it on: a
        stockout in its region fails the job with STOCKOUT, as Vertex does once its stockout
        retries are spent (a capacity ladder then moves on)."""
        if decision.action not in (Action.RESTART_REPLICA, Action.RESTART_JOB):
            return decision
        error = capacity.lost_to_stockout(self._capacity, self._need(job))
        if error is None:
            return decision
        return Decision(Action.FAIL, error=error, note=f"cannot restart: {error.message}")

    def _apply(self, job: ActiveJob, replica: Replica, decision: Decision) -> None:
        """Spend the counters a decision names, then do what it says."""
        if decision.count_job_retry:
            job.rt.retries += 1
        if decision.reset_restarts:
            for other in job.rt.replicas:
                other.restarts_counted = 0
        if decision.count_restart:
            replica.restarts_counted += 1
        if decision.note:
            self._service_log(job, decision.note)
        if decision.action is Action.RESTART_REPLICA:
            replica.restart += 1
            self._spawn(job, replica)
        elif decision.action.stop is not None:
            job.rt.retrying = decision.count_job_retry
            self._stop_all(job, decision.action.stop, decision.error)

    def _preempt(self, job: ActiveJob, replica: Replica, why: str) -> None:
        grace_s = self.settings.grace_s
        replica.preempted = True
        job.rt.preempted_replica = replica.name
        job.rt.preemption_until = lifecycle.preemption_window(time.time(), grace_s)
        self._service_log(
            job, f"preempting {replica.name} ({why}): SIGTERM now, SIGKILL in {grace_s:g} s"
        )
        self._service_log(job, lifecycle.PREEMPTION_EXITS_NOTE)
        self._signal(replica, signal.SIGTERM)
        self._persist(job)

    def _signal(self, replica: Replica, sig: signal.Signals) -> None:
        self._let_go(replica)
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

    def _stop_all(self, job: ActiveJob, reason: StopReason, error: JobError | None = None) -> None:
        job.rt.stopping = reason
        job.rt.final_error = error.rest() if error else None
        for replica in job.rt.replicas:
            if replica.running:
                self._signal(replica, signal.SIGTERM)
        self._persist(job)

    def _timers(self, job: ActiveJob) -> None:
        rt, now = job.rt, time.time()
        for replica in rt.replicas:
            overdue = lifecycle.grace_over(replica.term_at, now, self.settings.grace_s)
            # Alive asked too: an exit seen waits a tick before it is logged (_poll).
            if replica.running and overdue and not replica.killed and self._alive(replica):
                self._service_log(job, f"{replica.name} still running after grace: SIGKILL")
                self._signal(replica, signal.SIGKILL)
                self._persist(job)
        if rt.stopping or rt.started_at is None:
            return
        overtime = lifecycle.deadline_exceeded(rt.started_at, now, job.view.scheduling.timeout_s)
        if overtime is not None:
            self._stop_all(job, StopReason.TIMEOUT, overtime)
            return
        if rt.chaos_next < len(rt.chaos) and now - rt.started_at >= rt.chaos[rt.chaos_next][0]:
            target = rt.replicas[rt.chaos[rt.chaos_next][1]]
            rt.chaos_next += 1
            if target.running and not lifecycle.in_window(rt.preemption_until, now):
                self._preempt(job, target, "chaos")
            self._persist(job)

    def _finish_stop(self, job: ActiveJob, reason: StopReason) -> None:
        state = lifecycle.final_state(reason)
        if state is not None and self._logs.pending(job.id):
            return  # it ends once its lines are all copied: `vtx logs` after its end has them all
        rt = job.rt
        error = (
            JobError(Code(rt.final_error["code"]), rt.final_error["message"])
            if rt.final_error
            else None
        )
        rt.stopping, rt.final_error = None, None
        if state is None:
            self._start_all_again(job)
            return
        self._set_state(job, state, error)
        self._service_log(job, f"job {state.short}")

    def _start_all_again(self, job: ActiveJob) -> None:
        """A retry of the job, or a restart of every replica (restartJobOnWorkerRestart): every
        replica starts again, each as its next restart, on new ports."""
        rt = job.rt
        rt.ports = self._ports(rt)
        rt.preemption_until, rt.preempted_replica = None, None
        for replica in rt.replicas:
            replica.restart += 1
            replica.status = ReplicaStatus.NEW
        if rt.retrying:
            what = f"retrying the job (retry {rt.retries} of {lifecycle.JOB_RETRY_LIMIT})"
        else:  # with restartJobOnWorkerRestart no replica restarts alone: they share one number
            what = f"restarting every replica (restart {max(r.restart for r in rt.replicas)})"
        rt.retrying = False
        self._service_log(job, what)
        for replica in rt.replicas:
            self._spawn(job, replica)

    # -- logs and state --------------------------------------------------------------------

    def _log_source(self, job: ActiveJob, replica: Replica, restart: int) -> Source:
        path = self._replica_file(job.id, replica, restart, "log")
        return Source(path, job.id, job.view.run_id, replica.name, restart)

    def _follow_logs(self, job: ActiveJob) -> None:
        """After a restart of the control plane, copy what is left of every log file of the
        job's replicas (the ended ones' files too: a crash may have come before their ends were
        copied)."""
        for replica in job.rt.replicas:
            for restart in range(replica.restart + 1):
                source = self._log_source(job, replica, restart)
                if Path(source.path).exists():
                    source.ended = not (replica.running and restart == replica.restart)
                    self._logs.follow(source)

    def _service_log(self, job: ActiveJob, message: str) -> None:
        self._logs.service(job.id, job.view.run_id, message)

    def _set_state(self, job: ActiveJob, state: JobState, error: JobError | None = None) -> None:
        lifecycle.stamp_state(job.resource, state, now_rfc3339(), error)
        self._persist(job)

    def _persist(self, job: ActiveJob) -> None:
        self.store.put_job(job.id, job.resource, job.rt.model_dump(mode="json"))
