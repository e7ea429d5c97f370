"""`vtx deploy MODEL[@VERSION|@ALIAS]` and `vtx undeploy ENDPOINT ID|--all`: a registered model
version served from an Endpoint, and taken off it again.

Stages, as a launch goes (vtx/commands/deploy.py runs them):
- plan (``plan_deploy``, ``plan_undeploy``): every check first, every problem at once
  (``DeployRefused``): the model version exists; the endpoint named exists (an id) or is found
  by display name (else created); machine, accelerator and counts pass the catalog rules a
  training pool passes (`jobs.custom_jobs.rules`) over serving's own machine list
  (serving_machines.yaml), in the stack's region; replicas and traffic are in range;
  the stack exports a serving service account. The result is the exact REST ``DeployedModel``,
  the endpoint's traffic split after the change, and the $/h floor and ceiling
  (`jobs.pricing.serving_cost`).
- the user confirms the printed plan.
- send (``deploy``, ``undeploy``): EndpointServiceClient's create_endpoint, deploy_model,
  undeploy_model through the SDK, each operation waited for.

Traffic follows Vertex's rules (DeployModelRequest/UndeployModelRequest ``traffic_split``): a
split, when sent, replaces the endpoint's and must add up to 100, the model being deployed is
called "0" in it, and a DeployedModel that still has traffic cannot be undeployed unless the new
split takes it away. The split after a deploy or undeploy is computed the way the SDK's
``Endpoint._allocate_traffic`` / ``_unallocate_traffic`` do, so `vtx` and the SDK agree.

CreateEndpoint and DeployModel are not idempotent (a retried request makes a second endpoint or a
second replica set), so each is sent once and a 503 is retried only after checking that nothing
landed meanwhile, as `client.Vertex.create` does for jobs. aiplatform is imported inside the
functions that send."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.contract import VTX_LABELS
from jobs.core.naming import display_name_max
from jobs.core.problems import Refused
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.facts import JobFacts, PoolFacts
from jobs.custom_jobs.rules.machines import (
    accelerator_fits_machine,
    accelerator_offered_in_region,
    machine_offered_in_region,
    machine_type_known,
    region_known,
)
from jobs.pricing.serving_cost import ServingCost, serving_cost
from jobs.serving.endpoint_access import access_of, access_problems, new_endpoint_fields
from jobs.serving.endpoint_rest import EndpointRecord, EndpointRest
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.vertex.client import create_and_wait, service_client
from jobs.vertex.errors import NOT_FOUND, VertexError, explain
from jobs.vertex.locations import parent
from jobs.vertex.retry import Backoff

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1


NEW = "0"
"""What a DeployModelRequest's traffic_split calls the model being deployed (Vertex fills in its
id)."""
DEPLOY_TIMEOUT_S = 3600.0
"""How long to wait for a deploy's operation: Vertex provisions nodes and pulls the image, often
10-30 minutes for GPU machines."""
ENDPOINT_TIMEOUT_S = 600.0
DEFAULT_MACHINE = "n1-standard-4"
SERVING_RULES = (
    machine_type_known,
    region_known,
    machine_offered_in_region,
    accelerator_fits_machine,
    accelerator_offered_in_region,
)
"""The catalog rules a training pool passes that say something about a serving node too."""
OPTION_PATHS = {
    "pool": "--machine",
    "machine": "--machine",
    "accelerator": "--accelerator",
    "accelerator_count": "--accelerator-count",
    "replicas": "--min-replicas",
}

T = TypeVar("T")


class DeployRefused(Refused):
    """What stops a deploy or undeploy, every problem found (each names what to do)."""


@dataclass(frozen=True)
class DeployOptions:
    """What the user asked for beyond the model."""

    machine: str = DEFAULT_MACHINE
    accelerator: str | None = None
    """Default: the machine's built-in accelerator (A2/A3/G2), else none."""
    accelerator_count: int | None = None
    """Default: the built-in count, else 1 with an accelerator."""
    min_replicas: int = 1
    max_replicas: int | None = None
    """Default: ``min_replicas`` (no autoscaling)."""
    traffic: int | None = None
    """Percent of the endpoint's traffic for this model. Default: 100 on an endpoint serving
    nothing, else 0 (as the SDK's ``Model.deploy``); the others keep their shares, scaled."""
    endpoint: str | None = None
    """An endpoint id or full name (must exist), or a display name (reused when one endpoint
    has it, created when none does). Default: a new endpoint named after the model."""


@dataclass(frozen=True)
class DeployPlan:
    """A deploy, checked: the exact REST DeployedModel, where it goes, and what it costs."""

    model: ModelRecord
    endpoint: EndpointRecord | None
    """The endpoint deployed to; None: a new one, ``endpoint_display_name``."""
    endpoint_display_name: str
    deployed_model: dict
    traffic: dict[str, int]
    """The endpoint's split after the deploy; the new model is NEW ("0")."""
    cost: ServingCost
    endpoint_fields: dict = field(default_factory=dict)
    """A new endpoint's ``network`` or ``privateServiceConnectConfig`` (a private stack)."""

    @property
    def access(self) -> str:
        return access_of(self.endpoint.rest if self.endpoint else self.endpoint_fields)

    @property
    def machine(self) -> dict:
        return dict(self.deployed_model["dedicatedResources"]["machineSpec"])

    @property
    def service_account(self) -> str:
        return str(self.deployed_model["serviceAccount"])


@dataclass(frozen=True)
class Deployed:
    endpoint: str
    """The endpoint's resource name."""
    deployed_model_id: str


@dataclass(frozen=True)
class UndeployStep:
    deployed_model_id: str
    traffic: dict[str, int]
    """The split sent with it: the endpoint's after this step (empty: none left, or unchanged)."""


@dataclass(frozen=True)
class UndeployPlan:
    endpoint: EndpointRecord
    steps: list[UndeployStep]


# -- traffic -------------------------------------------------------------------------------------


def allocate_traffic(split: dict[str, int], percent: int) -> dict[str, int]:
    """The split after deploying a model with ``percent``: the others share the rest in their
    current proportions, rounded down, the remainder one point each in order (the SDK's
    ``Endpoint._allocate_traffic``)."""
    rest = 100 - percent
    after: dict[str, int] = {}
    if rest:
        unallocated = rest
        for deployed_id, share in split.items():
            after[deployed_id] = int(share / 100 * rest)
            unallocated -= after[deployed_id]
        for deployed_id in after:
            if unallocated == 0:
                break
            after[deployed_id] += 1
            unallocated -= 1
    after[NEW] = percent
    return after


def unallocate_traffic(split: dict[str, int], deployed_id: str) -> dict[str, int]:
    """The split after undeploying ``deployed_id``: its share goes to the others in proportion
    to theirs, rounded down, the remainder one point each in order (the SDK's
    ``Endpoint._unallocate_traffic``, which also keeps the undeployed model at 0: here it is left
    out). When it held everything the others keep 0 each, which Vertex refuses (a split must add
    up to 100): `plan_undeploy` says so."""
    after = {k: v for k, v in split.items() if k != deployed_id}
    left = 100 - split.get(deployed_id, 0)
    if left and after:
        after = {k: int(v / left * 100) for k, v in after.items()}
        unallocated = 100 - sum(after.values())
        for deployed_id_ in after:
            if unallocated == 0:
                break
            after[deployed_id_] += 1
            unallocated -= 1
    return after


def _traffic_problems(split: dict[str, int], names: str) -> list[str]:
    problems = [
        f"{names}: {k}={v} is not a percentage (0 to 100)"
        for k, v in split.items()
        if not 0 <= v <= 100
    ]
    if split and sum(split.values()) != 100:
        problems.append(
            f"{names}: the shares add up to {sum(split.values())}; Vertex takes a split that adds "
            f"up to 100"
        )
    return problems


# -- planning a deploy ---------------------------------------------------------------------------


def machine_problems(
    cat: Catalog, region: str, machine: str, accelerator: str | None, count: int | None
) -> list[str]:
    """The catalog's machine rules over one serving node (the same `jobs.custom_jobs.rules`
    functions a training pool passes; ``cat`` is the serving view, `Catalog.for_serving`), each
    problem naming the option to change."""
    pool = PoolFacts(
        role="serving",
        paths=OPTION_PATHS,
        machine=machine,
        accelerator=accelerator,
        accelerator_count=count,
        replicas=1,
    )
    job = JobFacts(paths={"region": f"the stack's region {region}"}, region=region, pools=[pool])
    return [str(p) for rule in SERVING_RULES for p in rule(job, cat)]


def _accelerator(
    cat: Catalog, machine: str, accelerator: str | None, count: int | None
) -> tuple[str | None, int | None]:
    """The accelerator and count to request: a built-in one filled in when none is named."""
    builtin = cat.builtin_accelerator(machine)
    if accelerator is None and count is None and builtin is not None:
        return builtin
    if accelerator is not None and count is None:
        return accelerator, builtin[1] if builtin and builtin[0] == accelerator else 1
    return accelerator, count


def _replica_problems(options: DeployOptions, max_replicas: int) -> list[str]:
    problems = []
    if options.min_replicas < 1:
        problems.append(
            f"--min-replicas {options.min_replicas}: at least 1 (Vertex AI Prediction does not "
            f"scale to zero: a deployed model always runs at least one node)"
        )
    if max_replicas < options.min_replicas:
        problems.append(
            f"--max-replicas {max_replicas} is below --min-replicas {options.min_replicas}: "
            f"give a max of at least {options.min_replicas}, or leave it out (= min)"
        )
    return problems


def _model(models: ModelRest, ref: str, problems: list[str]) -> ModelRecord | None:
    try:
        return models.get_model(ref)
    except VertexError as err:
        if err.http_code != NOT_FOUND:
            raise
        problems.append(
            f"model {ref}: no such model or version in {parent(models.stack)} (see `vtx model "
            f"list`, and `vtx model show MODEL` for its versions and aliases)"
        )
        return None


def _endpoint(
    endpoints: EndpointRest, ref: str | None, problems: list[str]
) -> EndpointRecord | None:
    """The endpoint ``--endpoint`` names, or None for a new one."""
    if ref is None:
        return None
    try:
        found = endpoints.find(ref)
    except VertexError as err:
        if err.http_code != NOT_FOUND:
            raise
        problems.append(
            f"--endpoint {ref}: no such endpoint in {parent(endpoints.stack)} (see `vtx endpoint "
            f"list`; a display name that no endpoint has creates one)"
        )
        return None
    if len(found) > 1:
        ids = ", ".join(e.endpoint_id for e in found)
        problems.append(
            f"--endpoint {ref}: {len(found)} endpoints have that name ({ids}): name one by id"
        )
        return None
    return found[0] if found else None


def _traffic(
    endpoint: EndpointRecord | None, percent: int | None, problems: list[str]
) -> dict[str, int]:
    serving = endpoint is not None and bool(endpoint.deployed)
    if percent is None:
        percent = 0 if serving else 100
    if not 0 <= percent <= 100:
        problems.append(f"--traffic {percent}: a percentage, 0 to 100")
        return {}
    if not serving and percent != 100:
        problems.append(
            f"--traffic {percent}: the endpoint serves no other model, so this one takes all of "
            f"its traffic (100); leave --traffic out"
        )
        return {}
    return allocate_traffic(endpoint.traffic if endpoint else {}, percent)


def deployed_model(
    model: ModelRecord,
    machine: str,
    accelerator: str | None,
    count: int | None,
    min_replicas: int,
    max_replicas: int,
    service_account: str,
) -> dict:
    """The REST DeployedModel: the version pinned (``name@version``), dedicated nodes, the
    stack's serving identity."""
    spec: dict[str, Any] = {"machineType": machine}
    if accelerator is not None:
        spec |= {"acceleratorType": accelerator, "acceleratorCount": count or 1}
    return {
        "model": f"{model.name}@{model.version_id}",
        "displayName": (model.display_name or model.model_id)[: display_name_max()],
        "dedicatedResources": {
            "machineSpec": spec,
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
        },
        "serviceAccount": service_account,
    }


def plan_deploy(
    stack: StackOutputs,
    model_ref: str,
    options: DeployOptions,
    models: ModelRest,
    endpoints: EndpointRest,
    catalog: Catalog | None = None,
) -> DeployPlan:
    """Every check before a deploy; raises DeployRefused with all problems found. Machines are
    serving's (`Catalog.for_serving`), not training's."""
    cat = (catalog or load_catalog()).for_stack(stack).for_serving()
    problems: list[str] = []
    if stack.serving_service_account is None:
        problems.append(
            f"stack {stack.project} ({stack.environment}) exports no serving_service_account: "
            f"deployed models run as that account (it reads the models bucket and writes logs); "
            f"`pulumi up` the stack with the current infra/ to create it, then deploy"
        )
    accelerator, count = _accelerator(
        cat, options.machine, options.accelerator, options.accelerator_count
    )
    problems += machine_problems(cat, stack.region, options.machine, accelerator, count)
    max_replicas = options.min_replicas if options.max_replicas is None else options.max_replicas
    problems += _replica_problems(options, max_replicas)
    model = _model(models, model_ref, problems)
    endpoint = _endpoint(endpoints, options.endpoint, problems)
    traffic = _traffic(endpoint, options.traffic, problems)
    problems += access_problems(stack, endpoint)
    if problems or model is None:
        raise DeployRefused(problems)
    display = endpoint.display_name if endpoint else options.endpoint or model.display_name
    return DeployPlan(
        model=model,
        endpoint=endpoint,
        endpoint_display_name=(display or model.model_id)[: display_name_max()],
        deployed_model=deployed_model(
            model,
            options.machine,
            accelerator,
            count,
            options.min_replicas,
            max_replicas,
            stack.serving_service_account or "",
        ),
        traffic=traffic,
        cost=serving_cost(
            cat,
            stack.region,
            options.machine,
            accelerator,
            count or 0,
            options.min_replicas,
            max_replicas,
        ),
        endpoint_fields=new_endpoint_fields(stack),
    )


# -- planning an undeploy ------------------------------------------------------------------------


def plan_undeploy(
    endpoints: EndpointRest,
    endpoint_ref: str,
    deployed_id: str | None,
    split: dict[str, int] | None = None,
) -> UndeployPlan:
    """Which DeployedModels to undeploy, in which order, each with the split it leaves.
    ``deployed_id`` None: all of them (smallest share first, so that what is left always holds
    the traffic; the last leaves the endpoint empty). ``split``: the split to leave instead of
    the proportional one (one model only)."""
    try:
        endpoint = endpoints.get_endpoint(endpoints.resolve(endpoint_ref))
    except VertexError as err:
        if err.http_code not in (NOT_FOUND, 400):
            raise
        raise DeployRefused([str(err)]) from err
    if not endpoint.deployed:
        raise DeployRefused([f"endpoint {endpoint.name} has no deployed model"])
    if deployed_id is None:
        order = sorted(endpoint.deployed, key=lambda d: endpoint.traffic.get(d.id, 0))
        steps, traffic = [], dict(endpoint.traffic)
        for deployed in order:
            traffic = unallocate_traffic(traffic, deployed.id)
            steps.append(UndeployStep(deployed.id, traffic if sum(traffic.values()) else {}))
        return UndeployPlan(endpoint, steps)
    if endpoint.deployed_model(deployed_id) is None:
        ids = ", ".join(d.id for d in endpoint.deployed)
        raise DeployRefused(
            [
                f"{endpoint.name} has no deployed model {deployed_id} (it has {ids}: see `vtx "
                f"endpoint show`)"
            ]
        )
    return UndeployPlan(endpoint, [_undeploy_step(endpoint, deployed_id, split)])


def _undeploy_step(
    endpoint: EndpointRecord, deployed_id: str, split: dict[str, int] | None
) -> UndeployStep:
    remaining = [d.id for d in endpoint.deployed if d.id != deployed_id]
    if split is not None:
        problems = _traffic_problems(split, "--traffic")
        unknown = sorted(set(split) - set(remaining))
        if unknown:
            problems.append(
                f"--traffic names {', '.join(unknown)}, not among the models that stay "
                f"({', '.join(remaining) or 'none'})"
            )
        if problems:
            raise DeployRefused(problems)
        return UndeployStep(deployed_id, dict(split))
    after = unallocate_traffic(endpoint.traffic, deployed_id)
    if remaining and sum(after.values()) != 100:
        raise DeployRefused(
            [
                f"deployed model {deployed_id} takes all of {endpoint.name}'s traffic and "
                f"the others ({', '.join(remaining)}) take none: say where it goes, e.g. --traffic "
                f"{remaining[0]}=100, or undeploy them all with --all"
            ]
        )
    return UndeployStep(deployed_id, after if remaining else {})


# -- sending -------------------------------------------------------------------------------------


def make_endpoint_client(stack: StackOutputs) -> aiplatform_v1.EndpointServiceClient:
    from google.cloud import aiplatform_v1

    return service_client(aiplatform_v1.EndpointServiceClient, stack)


def _explained(exc: Exception, stack: StackOutputs, what: str) -> VertexError:
    """An SDK error in a deployment's words (client.explain speaks of jobs for 400 and 403)."""
    from google.api_core import exceptions

    code = exc.code if isinstance(exc, exceptions.GoogleAPICallError) else None
    said = exc.message if isinstance(exc, exceptions.GoogleAPICallError) else str(exc)
    if code == 400:
        return VertexError(f"Vertex refused the {what}: {said}", 400)
    if code == 403:
        return VertexError(
            f"permission denied in {stack.project}: deploying needs roles/aiplatform.user and "
            f"roles/iam.serviceAccountUser on {stack.serving_service_account}. Vertex said: "
            f"{said}",
            403,
        )
    return explain(exc, stack)


def _once(
    stack: StackOutputs,
    what: str,
    send: Callable[[], T],
    landed: Callable[[], T | None],
    backoff: Backoff,
    timeout_s: float,
) -> T:
    """Send a call that must not run twice and wait for its operation (``create_and_wait``),
    an API error said in a deployment's words."""
    return create_and_wait(
        stack, what, send, landed, backoff, timeout_s, "`vtx endpoint show`",
        lambda exc: _explained(exc, stack, what),
    )  # fmt: skip


def _create_endpoint(
    stack: StackOutputs,
    plan: DeployPlan,
    rest: EndpointRest,
    client: aiplatform_v1.EndpointServiceClient,
    backoff: Backoff,
) -> str:
    from google.cloud import aiplatform_v1

    labels = {k: plan.model.labels[k] for k in VTX_LABELS if k in plan.model.labels}
    body = {"displayName": plan.endpoint_display_name, "labels": labels}
    endpoint = aiplatform_v1.Endpoint.from_json(json.dumps(body | plan.endpoint_fields))
    named = f'display_name="{plan.endpoint_display_name}"'
    before = {e.name for e in rest.list_endpoints(named)}

    def send() -> str:
        operation = client.create_endpoint(parent=parent(stack), endpoint=endpoint, retry=None)
        return str(operation.result(timeout=ENDPOINT_TIMEOUT_S).name)

    def landed() -> str | None:
        new = sorted(e.name for e in rest.list_endpoints(named) if e.name not in before)
        return new[-1] if new else None

    return _once(stack, "endpoint creation", send, landed, backoff, ENDPOINT_TIMEOUT_S)


def deploy(
    stack: StackOutputs,
    plan: DeployPlan,
    rest: EndpointRest,
    client: aiplatform_v1.EndpointServiceClient | None = None,
    backoff: Backoff = Backoff(),
    timeout_s: float = DEPLOY_TIMEOUT_S,
) -> Deployed:
    """Create the endpoint when the plan needs one, then deploy and wait for the operation."""
    from google.cloud import aiplatform_v1

    client = client or make_endpoint_client(stack)
    name = (
        plan.endpoint.name
        if plan.endpoint
        else _create_endpoint(stack, plan, rest, client, backoff)
    )
    request = aiplatform_v1.DeployModelRequest(
        endpoint=name,
        deployed_model=aiplatform_v1.DeployedModel.from_json(json.dumps(plan.deployed_model)),
        traffic_split=plan.traffic,
    )
    before = {d.id for d in rest.get_endpoint(name).deployed}

    def send() -> Deployed:
        operation = client.deploy_model(request=request, retry=None)
        return Deployed(name, str(operation.result(timeout=timeout_s).deployed_model.id))

    def landed() -> Deployed | None:
        new = [
            d.id
            for d in rest.get_endpoint(name).deployed
            if d.id not in before and d.model == plan.model.name
        ]
        return Deployed(name, new[-1]) if new else None

    return _once(stack, "deployment", send, landed, backoff, timeout_s)


def undeploy(
    stack: StackOutputs,
    plan: UndeployPlan,
    rest: EndpointRest,
    client: aiplatform_v1.EndpointServiceClient | None = None,
    backoff: Backoff = Backoff(),
    timeout_s: float = DEPLOY_TIMEOUT_S,
) -> list[str]:
    """Undeploy each planned DeployedModel in turn with its split; the ids undeployed. A 503 is
    retried after checking that the model is still there (if not, that step is done)."""
    client = client or make_endpoint_client(stack)
    name = plan.endpoint.name
    done: list[str] = []
    for step in plan.steps:

        def send(step: UndeployStep = step) -> str:
            operation = client.undeploy_model(
                endpoint=name,
                deployed_model_id=step.deployed_model_id,
                traffic_split=step.traffic,
                retry=None,
            )
            operation.result(timeout=timeout_s)
            return step.deployed_model_id

        def gone(step: UndeployStep = step) -> str | None:
            still = rest.get_endpoint(name).deployed_model(step.deployed_model_id)
            return step.deployed_model_id if still is None else None

        done.append(_once(stack, "undeploy", send, gone, backoff, timeout_s))
    return done
