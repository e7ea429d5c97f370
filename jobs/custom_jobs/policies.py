"""Organisation rules for rendered CustomJobs (`vtx validate --policy`).

Template validation answers "will Vertex accept this job?"; these rules answer "may this team run
it on this stack?". They read the REST (camelCase) form of a CustomJob, the same document that is
submitted, so what is checked is what runs. Pure functions over dicts: cheap to import, no SDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jobs.core.catalog import vertex_default_timeout_s
from jobs.core.durations import parse_duration_s
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs, is_production

SECONDS_PER_HOUR = 3600

# Outside prod, a forgotten job should stop burning accelerators within two days; in prod the
# cap is Vertex's own default timeout (the catalog's limits).
NON_PROD_TIMEOUT_CAP_S = 48 * SECONDS_PER_HOUR

# Google's own images that a prod job may pull besides the stack's registry: the prebuilt
# training containers (pythonPackageSpec executors) and the Reduction Server image.
GOOGLE_VERTEX_IMAGE_PREFIXES = tuple(
    f"{area}-docker.pkg.dev/{repo}/"
    for area in ("us", "europe", "asia")
    for repo in ("vertex-ai", "vertex-ai-restricted")
)

DEFAULT_COMPUTE_ACCOUNT = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")

JobRule = Callable[[Mapping[str, Any], StackOutputs], Iterator[Problem]]


def timeout_cap_s(environment: str) -> int:
    return vertex_default_timeout_s() if is_production(environment) else NON_PROD_TIMEOUT_CAP_S


def _job_spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = job.get("jobSpec")
    return spec if isinstance(spec, Mapping) else {}


def worker_pools(job: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    pools = _job_spec(job).get("workerPoolSpecs") or []
    for index, pool in enumerate(pools):
        # Vertex skips a pool given as {}; so do we.
        if isinstance(pool, Mapping) and pool:
            yield index, pool


def no_web_access_in_prod(job: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    """Interactive shells and dashboards bypass the job's audit trail; not in prod."""
    if not is_production(stack.environment):
        return
    spec = _job_spec(job)
    for field in ("enableWebAccess", "enableDashboardAccess"):
        if spec.get(field):
            yield Problem(
                path=f"jobSpec.{field}",
                message=f"interactive access is not allowed on the prod stack ({field}: true)",
                hint=f"remove {field} or launch against the dev stack to debug interactively",
            )


def spot_needs_checkpoint_dir(job: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    """A Spot VM can be taken away at any time; without a checkpoint prefix the work is lost."""
    spec = _job_spec(job)
    scheduling = spec.get("scheduling") or {}
    if scheduling.get("strategy") != "SPOT":
        return
    prefix = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if not prefix:
        yield Problem(
            path="jobSpec.baseOutputDirectory.outputUriPrefix",
            message="a Spot job has no checkpoint directory: a preemption would lose all progress",
            hint=f"set it to gs://{stack.buckets.checkpoints}/runs/<run-id>/ "
            "(vtx launch does this for you)",
        )
    elif not str(prefix).startswith("gs://"):
        yield Problem(
            path="jobSpec.baseOutputDirectory.outputUriPrefix",
            message=f"{prefix!r} is not a gs:// URI; checkpoints must outlive the VM",
            hint=f"use gs://{stack.buckets.checkpoints}/runs/<run-id>/",
        )


def timeout_within_cap(job: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    """Every job ends by itself: the timeout (or Vertex's 7-day default) stays under the cap."""
    cap_s = timeout_cap_s(stack.environment)
    raw = (_job_spec(job).get("scheduling") or {}).get("timeout")
    path = "jobSpec.scheduling.timeout"
    hint = f"set {path} to at most {cap_s}s ({cap_s / SECONDS_PER_HOUR:g} h)"
    if raw is None:
        if cap_s < vertex_default_timeout_s():
            yield Problem(
                path=path,
                message=f"no timeout: Vertex would allow {vertex_default_timeout_s()}s, over the "
                f"{stack.environment} cap of {cap_s}s",
                hint=hint,
            )
        return
    timeout_s = parse_duration_s(raw)
    if timeout_s is None:
        yield Problem(path=path, message=f"{raw!r} is not a duration", hint=hint)
    elif timeout_s > cap_s:
        yield Problem(
            path=path,
            message=f"{raw} exceeds the {stack.environment} cap of {cap_s}s",
            hint=hint,
        )


def images_from_stack_registry(job: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    """In prod only images the platform team's registry scanned (or Google's own) may run."""
    if not is_production(stack.environment):
        return
    allowed = (stack.artifact_registry.rstrip("/") + "/", *GOOGLE_VERTEX_IMAGE_PREFIXES)
    for index, pool in worker_pools(job):
        for spec_key, image_key in (
            ("containerSpec", "imageUri"),
            ("pythonPackageSpec", "executorImageUri"),
        ):
            image = (pool.get(spec_key) or {}).get(image_key)
            if image and not str(image).startswith(allowed):
                yield Problem(
                    path=f"jobSpec.workerPoolSpecs[{index}].{spec_key}.{image_key}",
                    message=f"image {image!r} is not from the prod stack's registry",
                    hint=f"push it to {stack.artifact_registry}/ and reference it from there",
                )


def runs_as_dedicated_account(job: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    """Jobs run as the stack's trainer account, never the broad Compute Engine default one."""
    account = _job_spec(job).get("serviceAccount")
    path = "jobSpec.serviceAccount"
    if not account:
        yield Problem(
            path=path,
            message="no service account: the job's identity would be a Google-managed default",
            hint=f"set it to {stack.trainer_service_account}",
        )
    elif DEFAULT_COMPUTE_ACCOUNT.match(str(account)):
        yield Problem(
            path=path,
            message=f"{account} is the Compute Engine default account, which is far too broad",
            hint=f"use the stack's trainer account {stack.trainer_service_account}",
        )


JOB_RULES: tuple[JobRule, ...] = (
    no_web_access_in_prod,
    spot_needs_checkpoint_dir,
    timeout_within_cap,
    images_from_stack_registry,
    runs_as_dedicated_account,
)


def check_job_policies(job: dict, stack: StackOutputs) -> list[Problem]:
    """Every organisation-rule violation in a REST-form CustomJob, for the given stack."""
    return [problem for rule in JOB_RULES for problem in rule(job, stack)]
