"""HyperparameterTuningJobs: each trial a real CustomJob on the executor.

One thread ticks every ``TICK_S`` over the active studies: reads each running trial's
cloudml-hypertune file into its measurements, ends trials whose CustomJob ended, and asks
jobs/local/tuning/study_lifecycle.py what the study does next (start trials, succeed, fail); new
trials get their parameters from jobs/local/tuning/suggest.py. A trial's CustomJob is the study's
``trialJobSpec`` with ``--PARAMETER_ID=VALUE`` appended to every pool's args, its
``baseOutputDirectory`` the study's plus ``/TRIAL_ID`` (so ``AIP_MODEL_DIR`` is
``BASE/TRIAL_ID/model/``, as Vertex documents), the study's labels plus the trial's, and every
replica gets ``CLOUD_ML_TRIAL_ID``, ``CLOUD_ML_HP_METRIC_TAG`` and ``CLOUD_ML_HP_METRIC_FILE``
(a file in the trial job's directory of the data dir). The executor runs it like any job:
logs, capacity, preemption and restarts all apply.

Studies live in the store next to their runtime record (``StudyRuntime``), so a restarted
control plane goes on with them.
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from jobs.core.formats import now_rfc3339
from jobs.core.naming import display_name_max
from jobs.core.states import JobState
from jobs.local.custom_jobs.executor import Executor, ExecutorError
from jobs.local.custom_jobs.lifecycle import (
    CANCELED,
    PLATFORM_STOPPED,
    stamp_state,
)
from jobs.local.platform import vertex_env
from jobs.local.platform.rpc_status import Code, JobError
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.store import Store
from jobs.local.tuning.study_lifecycle import (
    Measurement,
    StudyCounts,
    TrialState,
    Verdict,
    decide,
    final_measurement,
    new_reports,
    parse_reports,
    trial_end,
)
from jobs.local.tuning.suggest import (
    Algorithm,
    Observation,
    parse_params,
    rest_parameters,
    study_seed,
    suggest,
    trial_args,
)

log = logging.getLogger(__name__)

TICK_S = 0.2
LABEL_STUDY = "vtx-hpt-job-id"
"""On a trial's CustomJob: the id of its HyperparameterTuningJob."""
LABEL_TRIAL = "vtx-hpt-trial-id"
"""On a trial's CustomJob: its trial id ("1", "2", ...)."""
METRIC_FILE = "hypertune/output.metrics"
"""Under the trial job's directory; hypertune's own default is /tmp/hypertune/output.metrics."""


class TrialRecord(BaseModel):
    id: str
    job_id: str
    metrics_path: str
    last_report: float | None = None
    """Timestamp of the last hypertune report read (the file is rewritten whole)."""


class StudyRuntime(BaseModel):
    trials: list[TrialRecord] = Field(default_factory=list)
    exhausted: bool = False
    """The algorithm had nothing left to suggest (a grid is done)."""
    stopping: JobState | None = None
    """The state the study ends in once its stopping trials' jobs are down."""
    final_error: dict | None = None


@dataclass
class ActiveStudy:
    resource: dict
    rt: StudyRuntime

    @property
    def id(self) -> str:
        return self.resource["name"].rsplit("/", 1)[-1]

    @property
    def state(self) -> JobState:
        return JobState(self.resource["state"])

    def trial(self, trial_id: str) -> dict:
        return next(t for t in self.resource["trials"] if t["id"] == trial_id)


def trial_job(study: dict, trial_id: str, point: dict, name: str) -> dict:
    """The CustomJob (REST form) that runs one trial of ``study`` with parameters ``point``."""
    spec = copy.deepcopy(study["trialJobSpec"])
    args = trial_args(point)
    for pool in spec.get("workerPoolSpecs", []):
        if not pool:
            continue
        target = pool.get("pythonPackageSpec") or pool.setdefault("containerSpec", {})
        target["args"] = [*target.get("args", []), *args]
    base = spec.get("baseOutputDirectory", {}).get("outputUriPrefix")
    if base:
        spec["baseOutputDirectory"] = {"outputUriPrefix": f"{base.rstrip('/')}/{trial_id}"}
    study_id = study["name"].rsplit("/", 1)[-1]
    job = {
        "name": name,
        "displayName": f"{study['displayName']}-trial-{trial_id}"[-display_name_max() :],
        "jobSpec": spec,
        "labels": {**study.get("labels", {}), LABEL_STUDY: study_id, LABEL_TRIAL: trial_id},
    }
    if "encryptionSpec" in study:
        job["encryptionSpec"] = study["encryptionSpec"]
    return job


def _measurement(rest: dict) -> Measurement:
    metrics = tuple((m["metricId"], float(m["value"])) for m in rest.get("metrics", []))
    return Measurement(int(rest.get("stepCount", 0)), metrics, 0.0)


class Studies:
    """The studies the control plane runs, on its executor."""

    def __init__(self, store: Store, executor: Executor, settings: LocalSettings) -> None:
        self.store = store
        self.executor = executor
        self.settings = settings
        self._studies: dict[str, ActiveStudy] = {}
        self._lock = threading.RLock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vtx-studies", daemon=True)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        states = tuple(s.value for s in (JobState.QUEUED, JobState.PENDING, JobState.RUNNING))
        for resource, raw in self.store.active_studies((*states, JobState.CANCELLING.value)):
            study = ActiveStudy(resource, StudyRuntime.model_validate(raw))
            self._studies[study.id] = study
            if study.rt.stopping is not None:
                # A stop the last control plane began may not have reached every trial's job
                # before it died: ask again, so the study ends as it was told to.
                self._stop_trials(study)
                self._persist(study)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop ticking and fail the active studies (the executor then stops their trials'
        jobs), as `vtx local down` fails running jobs."""
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for study in list(self._studies.values()):
                for trial in study.resource["trials"]:
                    if not TrialState(trial["state"]).done:
                        trial["state"] = TrialState.INFEASIBLE.value
                        trial["infeasibleReason"] = PLATFORM_STOPPED.message
                        trial["endTime"] = now_rfc3339()
                end = JobState.CANCELLED if study.rt.stopping is JobState.CANCELLED else None
                error = CANCELED if end else PLATFORM_STOPPED
                self._set_state(study, end or JobState.FAILED, error)
            self._studies.clear()

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                with self._lock:
                    for study in list(self._studies.values()):
                        self._tick_study(study)
            except Exception:  # keep supervising; the failure is in the log
                log.exception("studies tick failed")
            self._halt.wait(TICK_S)

    # -- requests ------------------------------------------------------------------------------

    def create(self, resource: dict) -> dict:
        """Accept a new study (already validated and named): QUEUED until its first trials
        are suggested at the next tick."""
        with self._lock:
            resource["state"] = JobState.QUEUED.value
            resource["createTime"] = resource["updateTime"] = now_rfc3339()
            resource["trials"] = []
            study = ActiveStudy(resource, StudyRuntime())
            self._studies[study.id] = study
            self._persist(study)
            # Rendered outside the lock while the tick changes the study: a copy, as the
            # executor's create answers.
            return copy.deepcopy(resource)

    def cancel(self, study_id: str) -> JobState | None:
        """Cancel a study: its running trials' CustomJobs are cancelled, then it is CANCELLED.
        A study already ended is left as it is. Returns the state it was in when asked (None:
        no such study), read and acted on under the lock, as Executor.cancel does."""
        with self._lock:
            study = self._studies.get(study_id)
            if study is None:
                resource = self.store.get_study(study_id)
                return JobState(resource["state"]) if resource is not None else None
            was = study.state
            if study.rt.stopping is None:
                self._stop(study, JobState.CANCELLED, CANCELED)
                self._set_state(study, JobState.CANCELLING)
            return was

    def delete(self, study_id: str) -> bool:
        """Delete an ended study; False when there was none (deleted meanwhile)."""
        with self._lock:
            if study_id in self._studies:
                raise ExecutorError(
                    400,
                    "FAILED_PRECONDITION",
                    f"HyperparameterTuningJob {study_id} is still "
                    f"{self._studies[study_id].state}; cancel it first",
                )
            return self.store.delete_study(study_id)

    # -- the tick ------------------------------------------------------------------------------

    def _tick_study(self, study: ActiveStudy) -> None:
        changed = False
        for record in study.rt.trials:
            changed |= self._poll_trial(study, record)
        if study.rt.stopping is not None:
            if not self._active(study):
                self._set_state(study, study.rt.stopping, self._final_error(study))
                self._studies.pop(study.id, None)
            elif changed:
                self._persist(study)
            return
        decision = decide(self._counts(study))
        if decision.verdict is Verdict.FAIL:
            self._stop(study, JobState.FAILED, JobError(Code.INTERNAL, decision.message or ""))
            self._persist(study)
        elif decision.verdict is Verdict.SUCCEED:
            self._set_state(study, JobState.SUCCEEDED)
            self._studies.pop(study.id, None)
        else:
            for _ in range(decision.start):
                if not self._start_trial(study):
                    break
                changed = True
            if changed:
                self._persist(study)

    @staticmethod
    def _active(study: ActiveStudy) -> list[dict]:
        return [t for t in study.resource["trials"] if not TrialState(t["state"]).done]

    def _counts(self, study: ActiveStudy) -> StudyCounts:
        r, trials = study.resource, study.resource["trials"]
        states = [TrialState(t["state"]) for t in trials]
        return StudyCounts(
            max_trials=int(r.get("maxTrialCount", 0)),
            parallel=int(r.get("parallelTrialCount", 0)),
            max_failed=int(r.get("maxFailedTrialCount", 0)),
            suggested=len(trials),
            active=sum(1 for s in states if not s.done),
            succeeded=states.count(TrialState.SUCCEEDED),
            failed=states.count(TrialState.INFEASIBLE),
            first_failed=bool(states) and states[0] is TrialState.INFEASIBLE,
            exhausted=study.rt.exhausted,
            runnable=self._runnable(r),
        )

    def _runnable(self, resource: dict) -> int:
        """Trials the platform can run at once: its replicas over one trial's."""
        per_trial = sum(vertex_env.host_counts({"jobSpec": resource["trialJobSpec"]}))
        return max(1, self.settings.max_replicas // max(1, per_trial))

    def _final_error(self, study: ActiveStudy) -> JobError | None:
        error = study.rt.final_error
        return JobError(Code(error["code"]), error["message"]) if error else None

    def _stop(self, study: ActiveStudy, end: JobState, error: JobError) -> None:
        """End the study once its running trials' jobs, cancelled now, are down; no trial
        starts after this."""
        study.rt.stopping, study.rt.final_error = end, error.rest()
        self._stop_trials(study)

    def _stop_trials(self, study: ActiveStudy) -> None:
        """Cancel the job of every trial not yet done (cancelling one already cancelled or
        ended does nothing)."""
        for record in study.rt.trials:
            trial = study.trial(record.id)
            if TrialState(trial["state"]).done:
                continue
            trial["state"] = TrialState.STOPPING.value
            self.executor.cancel(record.job_id)  # a job deleted meanwhile: the next poll ends it

    # -- trials --------------------------------------------------------------------------------

    def _metric_ids(self, study: ActiveStudy) -> list[str]:
        return [m["metricId"] for m in study.resource["studySpec"].get("metrics", [])]

    def _start_trial(self, study: ActiveStudy) -> bool:
        """Suggest and submit the next trial; False when none can start now (a grid is done,
        the region's quota is full: tried again at the next tick)."""
        r = study.resource
        spec = r["studySpec"]
        params = parse_params(spec.get("parameters", []))
        metric = spec["metrics"][0]
        history = [
            Observation(
                {p["parameterId"]: p["value"] for p in t["parameters"]},
                float(t["finalMeasurement"]["metrics"][0]["value"]),
            )
            for t in r["trials"]
            if t["state"] == TrialState.SUCCEEDED.value and t.get("finalMeasurement")
        ]
        number = len(r["trials"])
        point = suggest(
            Algorithm(spec.get("algorithm", Algorithm.DEFAULT.value)),
            params,
            number,
            study_seed(r["name"]),
            history,
            maximize=metric.get("goal") != "MINIMIZE",
        )
        if point is None:
            study.rt.exhausted = True
            return False
        trial_id = str(number + 1)
        job_id = self.store.unused_id()
        parent = r["name"].split("/hyperparameterTuningJobs/")[0]
        job = trial_job(r, trial_id, point, f"{parent}/customJobs/{job_id}")
        metrics_path = self.settings.data_dir / "jobs" / job_id / METRIC_FILE
        metrics_path.parent.mkdir(parents=True, exist_ok=True)
        env = {
            "CLOUD_ML_TRIAL_ID": trial_id,
            "CLOUD_ML_HP_METRIC_TAG": metric["metricId"],
            "CLOUD_ML_HP_METRIC_FILE": str(metrics_path),
        }
        try:
            self.executor.submit(job, env)
        except ExecutorError as exc:
            if exc.http_code == 429:  # quota held by other jobs: wait for it, as Vertex queues
                return False
            self._stop(study, JobState.FAILED, JobError(Code.INVALID_ARGUMENT, exc.message))
            return False
        r["trials"].append(
            {
                "id": trial_id,
                "state": TrialState.ACTIVE.value,
                "parameters": rest_parameters(point),
                "startTime": now_rfc3339(),
                "customJob": job["name"],
            }
        )
        study.rt.trials.append(
            TrialRecord(id=trial_id, job_id=job_id, metrics_path=str(metrics_path))
        )
        if study.state is JobState.QUEUED:
            self._set_state(study, JobState.PENDING)
        return True

    def _poll_trial(self, study: ActiveStudy, record: TrialRecord) -> bool:
        """Read the trial's new reports; end it if its job ended. True if anything changed."""
        trial = study.trial(record.id)
        if TrialState(trial["state"]).done:
            return False
        changed = self._read_reports(study, record, trial)
        job = self.store.get_job(record.job_id)
        if job is None:
            self._end_trial(study, trial, JobState.FAILED, "its CustomJob was deleted")
            return True
        job_state = JobState(job["state"])
        starts = study.state in (JobState.QUEUED, JobState.PENDING)
        if job_state is JobState.RUNNING and starts and study.rt.stopping is None:
            self._set_state(study, JobState.RUNNING)
        if job_state.final:
            self._read_reports(study, record, trial)  # what it wrote last
            self._end_trial(study, trial, job_state, job.get("error", {}).get("message"))
            return True
        return changed

    def _read_reports(self, study: ActiveStudy, record: TrialRecord, trial: dict) -> bool:
        try:
            text = Path(record.metrics_path).read_text(errors="replace")
        except OSError:  # nothing reported yet
            return False
        fresh = new_reports(parse_reports(text, self._metric_ids(study)), record.last_report)
        if not fresh:
            return False
        trial.setdefault("measurements", []).extend(m.rest() for m in fresh)
        record.last_report = max(m.timestamp for m in fresh)
        return True

    def _end_trial(
        self, study: ActiveStudy, trial: dict, job_state: JobState, job_error: str | None
    ) -> None:
        spec = study.resource["studySpec"]
        metric = spec["metrics"][0]
        final = final_measurement(
            [_measurement(m) for m in trial.get("measurements", [])],
            spec.get("measurementSelectionType", ""),
            metric["metricId"],
            metric.get("goal", ""),
        )
        stopped = TrialState(trial["state"]) is TrialState.STOPPING
        end = trial_end(job_state, job_error, final, stopped=stopped)
        trial["state"] = end.state.value
        trial["endTime"] = now_rfc3339()
        if final is not None and end.state is TrialState.SUCCEEDED:
            trial["finalMeasurement"] = final.rest()
        if end.infeasible_reason:
            trial["infeasibleReason"] = end.infeasible_reason

    # -- state ---------------------------------------------------------------------------------

    def _set_state(
        self, study: ActiveStudy, state: JobState, error: JobError | None = None
    ) -> None:
        stamp_state(study.resource, state, now_rfc3339(), error)
        self._persist(study)

    def _persist(self, study: ActiveStudy) -> None:
        self.store.put_study(study.id, study.resource, study.rt.model_dump(mode="json"))
