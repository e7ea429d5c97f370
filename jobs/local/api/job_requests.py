"""What the CustomJob and HyperparameterTuningJob routes share: a request's parent (its project
checked), list filters, read masks, the answers to cancel and delete, and the checks a job's
spec passes on create (the real rules of `vtx validate`, and what the executor can run)."""

from __future__ import annotations

from collections.abc import Callable

from jobs.core.catalog import load_catalog
from jobs.core.states import JobState
from jobs.custom_jobs.validate import validate_custom_job
from jobs.local.api.api_errors import ApiError
from jobs.local.api.rest_forms import refuse_bad_read_mask
from jobs.local.custom_jobs.package_runner import spec_problems as package_spec_problems
from jobs.local.platform import vertex_env
from jobs.local.platform.filters import FilterError, parse_filter
from jobs.local.platform.operations import deleted
from jobs.local.platform.state import project_number


def check_read_mask(message_name: str, read_mask: str) -> None:
    """A List call's readMask is checked once, before any resource is cut by it."""
    from google.cloud import aiplatform_v1

    refuse_bad_read_mask(getattr(aiplatform_v1, message_name), read_mask)


def cancel_answer(kind: str, name: str, was: JobState | None) -> dict:
    """A cancel's answer from the state the resource was in when the cancel was acted on (the
    executor's or the studies' answer, under their lock): None, it was deleted meanwhile (404);
    a final state, it already ended, a 400 FAILED_PRECONDITION (AIP-216's rule for a state
    change a resource's state does not allow; the wording is ours); else ``{}``."""
    if was is None:
        raise ApiError(404, f"{kind} {name} does not exist")
    if was.final:
        raise ApiError(
            400,
            f"{kind} {name} is in state {was.value}: it already ended and cannot be cancelled",
            "FAILED_PRECONDITION",
        )
    return {}


def delete_answer(kind: str, name: str, found: bool) -> dict:
    """A delete's answer: the done operation, or 404 when a delete that raced this one removed
    the resource first."""
    if not found:
        raise ApiError(404, f"{kind} {name} does not exist")
    return deleted(name)


def validation_problems(job: dict, location: str) -> list[str]:
    """vtx's own rules for CustomJobs (machines, accelerators, pools, env, secrets...), the
    same that `vtx validate` applies."""
    return [str(p) for p in validate_custom_job(job, region=location)]


def executor_problems(job: dict) -> list[str]:
    """What the local executor itself needs to run a job, whatever the templates allow."""
    problems = []
    pools = job.get("jobSpec", {}).get("workerPoolSpecs", [])
    if not pools or not pools[0]:
        problems.append("jobSpec.workerPoolSpecs[0]: the primary pool is required")
    for i, pool in enumerate(pools):
        if (
            pool
            and not pool.get("containerSpec", {}).get("command")
            and not pool.get("pythonPackageSpec")
        ):
            problems.append(
                f"jobSpec.workerPoolSpecs[{i}].containerSpec.command: required locally, where "
                f"no container runtime can supply the image's ENTRYPOINT; set command "
                f"(e.g. [python, -m, trainer.launch])"
            )
        if pool and "pythonPackageSpec" in pool:
            problems += [
                f"jobSpec.workerPoolSpecs[{i}].pythonPackageSpec.{problem}"
                for problem in package_spec_problems(pool["pythonPackageSpec"])
            ]
        # A NUL in an env value is the rules' (jobs/custom_jobs/rules/environment.py).
        if pool and any("\x00" in word for word in vertex_env.replica_command(pool)):
            problems.append(
                f"jobSpec.workerPoolSpecs[{i}]: its command or args hold a NUL character, "
                f"which no process can be started with; remove it"
            )
    return problems


def job_problems(job: dict, location: str) -> list[str]:
    """Every check of a CustomJob create, for the pipelines' trainingTaskInputs."""
    return executor_problems(job) + validation_problems(job, location)


def trial_job_problems(study: dict, location: str) -> list[str]:
    """The customJobs checks on the trial's CustomJobSpec, named at trialJobSpec."""
    trial = {"displayName": study.get("displayName") or "trial", "jobSpec": study["trialJobSpec"]}
    problems = executor_problems(trial) + validation_problems(trial, location)
    return [f"trial{p[0].upper()}{p[1:]}" if p.startswith("jobSpec") else p for p in problems]


def checked_parent(project: str, location: str) -> str:
    """Every region the catalog knows is served, each with its own jobs, as Vertex's regional
    endpoints are: a capacity ladder's rung in another region lands there. Names carry the
    project's number, as Vertex's do."""
    number = check_project(project)
    regions = load_catalog().regions
    if location not in regions:
        raise ApiError(
            400,
            f"location {location!r} is not served here: the local platform serves the catalog's "
            f"regions ({', '.join(regions)})",
        )
    return f"projects/{number}/locations/{location}"


def job_in(parent: str, job: dict) -> bool:
    return str(job.get("name", "")).startswith(parent + "/")


def check_project(project: str) -> str:
    """The number of ``project`` (any project id or number is served, see
    state.project_number); 404 for what is neither."""
    number = project_number(project)
    if number is None:
        raise ApiError(
            404,
            f"project {project!r} does not exist: a project id is 6 to 30 lowercase letters, "
            f"digits or hyphens starting with a letter, a project number is digits",
        )
    return number


def job_filter(text: str) -> Callable[[dict], bool]:
    """A List call's ``filter`` (jobs/local/platform/filters.py's grammar), or its 400."""
    try:
        return parse_filter(text)
    except FilterError as exc:
        raise ApiError(400, str(exc)) from exc
