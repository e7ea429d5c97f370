"""Training pipelines: Vertex's TrainingPipeline for custom training tasks, the kind the SDK's
CustomTrainingJob, CustomContainerTrainingJob and CustomPythonPackageTrainingJob create.

A pipeline's ``trainingTaskDefinition`` is the custom task schema (``CUSTOM_TASK``) and its
``trainingTaskInputs`` a CustomJobSpec. Vertex runs it as a CustomJob underneath, named in
``trainingTaskMetadata.backingCustomJob`` (the schema's metadata, read by the SDK), and when the
pipeline carries ``modelToUpload``, uploads that Model once the job succeeded: its
``artifactUri`` defaults to the job's model directory (``AIP_MODEL_DIR``,
``BASE/model``), it becomes a version of ``parentModel`` when given, takes ``modelId``, and the
pipeline's ``modelToUpload`` then carries the uploaded version's name and version id.

States follow PipelineState's docs and Google's create example (docs/vertex-facts.md,
"TrainingPipeline"): PENDING from the create's answer on ("the service is preparing to run the
pipeline"), while its CustomJob is submitted and until that job runs, RUNNING with the job, then
SUCCEEDED (after the upload), FAILED (with the job's error, or the upload's) or CANCELLING then
CANCELLED. QUEUED is never set (a data dir written when creates stored it is still advanced). A
thread advances every active pipeline from its job's state; all of a pipeline is in the store,
so a restarted control plane goes on where it stopped.
"""

from __future__ import annotations

import logging
import threading

from jobs.core.formats import now_rfc3339
from jobs.core.naming import display_name_problem
from jobs.core.states import JobState
from jobs.local.custom_jobs.executor import Executor, ExecutorError
from jobs.local.platform import vertex_env
from jobs.local.platform.store import Store
from jobs.local.serving.models import ModelError, Models

log = logging.getLogger(__name__)

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
QUEUED = "PIPELINE_STATE_QUEUED"
PENDING = "PIPELINE_STATE_PENDING"
RUNNING = "PIPELINE_STATE_RUNNING"
SUCCEEDED = "PIPELINE_STATE_SUCCEEDED"
FAILED = "PIPELINE_STATE_FAILED"
CANCELLING = "PIPELINE_STATE_CANCELLING"
CANCELLED = "PIPELINE_STATE_CANCELLED"
ACTIVE = (QUEUED, PENDING, RUNNING, CANCELLING)
TERMINAL = (SUCCEEDED, FAILED, CANCELLED)
POLL_S = 0.2
# google.rpc.Code numbers of the errors a pipeline can end with.
RPC_CODES = {
    "CANCELLED": 1,
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "FAILED_PRECONDITION": 9,
    "RESOURCE_EXHAUSTED": 8,
    "INTERNAL": 13,
}
# The backing job's state -> the pipeline's, while the job has not ended well.
FROM_JOB_STATE = {
    JobState.QUEUED.value: PENDING,
    JobState.PENDING.value: PENDING,
    JobState.RUNNING.value: RUNNING,
    JobState.CANCELLING.value: CANCELLING,
    JobState.FAILED.value: FAILED,
    JobState.CANCELLED.value: CANCELLED,
}


class PipelineError(ExecutorError):
    """A request about a pipeline that is refused (answered in Google's error shape)."""


def custom_job_spec_problems(pipeline: dict) -> list[str]:
    """What a pipeline must be for the local platform to run it: a custom task with a
    CustomJobSpec as its inputs (the spec's own rules are the customJobs checks)."""
    problems = []
    display = display_name_problem(str(pipeline.get("displayName") or ""))
    if display is not None:
        problems.append(f"displayName: {display}")
    definition = pipeline.get("trainingTaskDefinition")
    if definition != CUSTOM_TASK:
        problems.append(
            f"trainingTaskDefinition: {definition!r} is not served here: the local platform runs "
            f"custom training tasks only ({CUSTOM_TASK}); AutoML tasks need Vertex"
        )
    if not isinstance(pipeline.get("trainingTaskInputs"), dict):
        problems.append("trainingTaskInputs: required, a CustomJobSpec (workerPoolSpecs...)")
    return problems


def parse_job_spec(inputs: dict) -> dict:
    """trainingTaskInputs (snake_case, as the SDK writes them, or camelCase) -> a REST-form
    CustomJobSpec, through the real proto; ValueError naming what the proto refused."""
    from google.cloud.aiplatform_v1 import CustomJobSpec
    from google.protobuf import json_format

    message = CustomJobSpec.pb(CustomJobSpec())
    try:
        json_format.ParseDict(inputs, message, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ValueError(f"trainingTaskInputs is not a CustomJobSpec: {exc}") from exc
    return json_format.MessageToDict(message)


def backing_job(pipeline: dict, job_name: str) -> dict:
    """The CustomJob that runs a pipeline's task: its spec, display name and labels."""
    job = {
        "name": job_name,
        "displayName": f"{pipeline['displayName']}-custom-job",
        "jobSpec": parse_job_spec(pipeline["trainingTaskInputs"]),
    }
    if pipeline.get("labels"):
        job["labels"] = dict(pipeline["labels"])
    if pipeline.get("encryptionSpec"):
        job["encryptionSpec"] = pipeline["encryptionSpec"]
    return job


def model_artifact_uri(pipeline: dict) -> str | None:
    """Where the uploaded Model's artifacts are: what modelToUpload names, else the job's
    AIP_MODEL_DIR (BASE/model), as the custom task does."""
    model = pipeline.get("modelToUpload") or {}
    if model.get("artifactUri"):
        return model["artifactUri"]
    job = {"jobSpec": parse_job_spec(pipeline["trainingTaskInputs"])}
    model_dir = vertex_env.output_dirs(job).get("AIP_MODEL_DIR")
    return model_dir.rstrip("/") if model_dir else None


def rpc_error(status: str, message: str) -> dict:
    return {"code": RPC_CODES.get(status, RPC_CODES["INTERNAL"]), "message": message}


class Pipelines:
    """Runs pipelines: submits each one's CustomJob to the executor, follows it, uploads the
    Model. Every change is written to the store before the lock is released."""

    def __init__(self, store: Store, executor: Executor) -> None:
        self.store, self.executor = store, executor
        self.models = Models(store)  # stateless over the store: the registry's own rules
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vtx-pipelines", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        """Stop following; the backing jobs are the executor's to stop."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def create(self, pipeline: dict) -> dict:
        """Store a new pipeline (``name`` set by the caller) as PENDING, as Vertex's create
        answers it; the thread submits its CustomJob."""
        stamp = now_rfc3339()
        pipeline.update(state=PENDING, createTime=stamp, updateTime=stamp)
        with self._lock:
            self.store.put_pipeline(_id(pipeline), pipeline)
        return pipeline

    def cancel(self, pipeline_id: str) -> dict | None:
        """Cancel an active pipeline: its CustomJob is cancelled, the pipeline is CANCELLING
        until the job ends (CANCELLED at once when it had none yet). None: no such pipeline
        (deleted meanwhile: read under the lock that the change is made under)."""
        with self._lock:
            pipeline = self.store.get_pipeline(pipeline_id)
            if pipeline is None:
                return None
            state = pipeline["state"]
            if state in TERMINAL:
                raise PipelineError(
                    400,
                    "FAILED_PRECONDITION",
                    f"TrainingPipeline {pipeline['name']} is in state {state}: it already ended "
                    f"and cannot be cancelled",
                )
            job_name = _backing_name(pipeline)
            if job_name is None:
                self._end(pipeline, CANCELLED, rpc_error("CANCELLED", "CANCELED"))
            elif state != CANCELLING:
                # A job deleted meanwhile: the next tick fails the pipeline.
                self.executor.cancel(job_name.rsplit("/", 1)[-1])
                self._set(pipeline, CANCELLING)
            return pipeline

    def delete(self, pipeline_id: str) -> bool:
        """Delete an ended pipeline (its CustomJob stays); an active one is a 400. False: no
        such pipeline (deleted meanwhile)."""
        with self._lock:
            pipeline = self.store.get_pipeline(pipeline_id)
            if pipeline is None:
                return False
            if pipeline["state"] not in TERMINAL:
                raise PipelineError(
                    400,
                    "FAILED_PRECONDITION",
                    f"TrainingPipeline {pipeline['name']} is still {pipeline['state']}; "
                    f"cancel it first",
                )
            return self.store.delete_pipeline(pipeline_id)

    # -- the thread ---------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.tick()
            except Exception:  # a bug of ours must not stop every pipeline for good
                log.exception("pipelines tick failed")

    def tick(self) -> None:
        """Advance every active pipeline one step from its job's state."""
        for pipeline in self.store.active_pipelines(ACTIVE):
            with self._lock:
                current = self.store.get_pipeline(_id(pipeline))
                if current is not None and current["state"] in ACTIVE:
                    self._advance(current)

    def _advance(self, pipeline: dict) -> None:
        job_name = _backing_name(pipeline)
        if job_name is None:
            self._submit(pipeline)
            return
        job = self.store.get_job(job_name.rsplit("/", 1)[-1])
        if job is None:
            message = f"the backing CustomJob {job_name} was deleted"
            self._end(pipeline, FAILED, rpc_error("INTERNAL", message))
            return
        if job.get("startTime") and "startTime" not in pipeline:
            pipeline["startTime"] = job["startTime"]  # it ran, even if between two ticks
        job_state = job.get("state", JobState.QUEUED.value)
        if job_state == JobState.SUCCEEDED.value:
            self._succeed(pipeline)
        elif job_state in (JobState.FAILED.value, JobState.CANCELLED.value):
            error = job.get("error") or rpc_error("INTERNAL", f"{job_name} ended {job_state}")
            self._end(pipeline, FROM_JOB_STATE[job_state], error)
        else:
            state = FROM_JOB_STATE.get(job_state, PENDING)
            if pipeline["state"] == CANCELLING:
                state = CANCELLING
            if state != pipeline["state"]:
                self._set(pipeline, state)

    def _submit(self, pipeline: dict) -> None:
        parent = pipeline["name"].split("/trainingPipelines/")[0]
        name = f"{parent}/customJobs/{self.store.unused_id()}"
        try:
            self.executor.submit(backing_job(pipeline, name))
        except ExecutorError as exc:  # e.g. quota: the pipeline fails as Vertex's would
            self._end(pipeline, FAILED, rpc_error(exc.status, exc.message))
            return
        except ValueError as exc:
            self._end(pipeline, FAILED, rpc_error("INVALID_ARGUMENT", str(exc)))
            return
        pipeline["trainingTaskMetadata"] = {"backingCustomJob": name}
        self._set(pipeline, PENDING)

    def _succeed(self, pipeline: dict) -> None:
        if pipeline.get("modelToUpload"):
            try:
                pipeline["modelToUpload"] = self._upload_model(pipeline)
            except ModelError as exc:
                self._end(pipeline, FAILED, rpc_error(exc.status, f"model upload: {exc.message}"))
                return
        self._end(pipeline, SUCCEEDED, None)

    def _upload_model(self, pipeline: dict) -> dict:
        """Register ``modelToUpload`` with the models service (jobs/local/serving/models.py), as the
        custom task's last step; returns the stored version."""
        model = dict(pipeline["modelToUpload"])
        artifact_uri = model_artifact_uri(pipeline)
        if artifact_uri:
            model["artifactUri"] = artifact_uri
        parent = pipeline["name"].split("/trainingPipelines/")[0]
        return self.models.register(
            parent,
            model,
            parent_model=pipeline.get("parentModel") or None,
            model_id=pipeline.get("modelId") or None,
            training_pipeline=pipeline["name"],
        )

    # -- state changes ------------------------------------------------------------------------

    def _set(self, pipeline: dict, state: str) -> None:
        stamp = now_rfc3339()
        pipeline["state"], pipeline["updateTime"] = state, stamp
        if state == RUNNING and "startTime" not in pipeline:
            pipeline["startTime"] = stamp
        self.store.put_pipeline(_id(pipeline), pipeline)

    def _end(self, pipeline: dict, state: str, error: dict | None) -> None:
        if error is not None:
            pipeline["error"] = error
        pipeline["endTime"] = now_rfc3339()
        self._set(pipeline, state)


def _id(pipeline: dict) -> str:
    return str(pipeline["name"]).rsplit("/", 1)[-1]


def _backing_name(pipeline: dict) -> str | None:
    return (pipeline.get("trainingTaskMetadata") or {}).get("backingCustomJob")
