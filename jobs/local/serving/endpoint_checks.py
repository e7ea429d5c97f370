"""What the local EndpointService refuses, as Vertex does (endpoint.proto, endpoint_service.proto):
a created Endpoint's name, labels and private networking, a deployed model's id and dedicated
resources checked by the catalog's serving rules; and what a private endpoint's deployed model
answers as its ``privateEndpoints``. Pure: the local-pure contract keeps processes, servers and
files out of it."""

from __future__ import annotations

import re

from jobs.core.catalog import load_catalog
from jobs.core.naming import RFC1035_PATTERN, display_name_problem, label_problems
from jobs.custom_jobs.facts import facts_from_rest_spec
from jobs.custom_jobs.rules.machines import accelerator_fits_machine, machine_type_known

ENDPOINT_ID = re.compile(rf"^(?:{RFC1035_PATTERN}|[1-9][0-9]{{0,8}})$")
"""CreateEndpointRequest.endpoint_id: a letter then up to 62 of [a-z0-9-] (not ending in '-'),
or up to 9 digits without a leading zero."""
PEERED_NETWORK = re.compile(rf"^projects/[0-9]+/global/networks/{RFC1035_PATTERN}$")
DEPLOYED_MODEL_ID = re.compile(rf"^[0-9]{{1,10}}$|^{RFC1035_PATTERN}$")


def endpoint_problems(endpoint: dict, endpoint_id: str | None) -> list[str]:
    """What a created Endpoint must be: a display name, valid labels, a valid id if given."""
    problems = []
    display = display_name_problem(str(endpoint.get("displayName", "")))
    if display is not None:
        problems.append(f"endpoint.displayName: {display}")
    if endpoint.get("trafficSplit"):
        problems.append("endpoint.trafficSplit: no model is deployed to a new endpoint")
    if endpoint_id is not None and not ENDPOINT_ID.match(endpoint_id):
        problems.append(
            f"endpointId: {endpoint_id!r}: a letter then up to 62 of a-z, 0-9 and '-' (not "
            f"ending with '-'), or up to 9 digits without a leading zero"
        )
    problems += private_problems(endpoint)
    return problems + [f"endpoint.{p}" for p in label_problems(dict(endpoint.get("labels", {})))]


def psc_enabled(endpoint: dict) -> bool:
    return bool(
        (endpoint.get("privateServiceConnectConfig") or {}).get("enablePrivateServiceConnect")
    )


def private_problems(endpoint: dict) -> list[str]:
    """endpoint.proto: ``network`` (a project *number*) or PSC, never both."""
    network = endpoint.get("network")
    problems = []
    if network and not PEERED_NETWORK.match(str(network)):
        problems.append(
            f"endpoint.network: {network!r}: projects/PROJECT_NUMBER/global/networks/NAME "
            f"(the project's number, not its id)"
        )
    if network and endpoint.get("privateServiceConnectConfig"):
        problems.append(
            "endpoint: network and privateServiceConnectConfig are mutually exclusive: set one"
        )
    return problems


def private_endpoints(endpoint: dict, record: dict) -> dict | None:
    """DeployedModel.privateEndpoints of a private endpoint. Locally: the serving process's own
    URIs for a peering endpoint (the SDK's PrivateEndpoint.predict calls them, as it calls the
    VPC address on Vertex), a service attachment name for a PSC one (nothing listens behind it)."""
    if endpoint.get("network"):
        base = f"http://127.0.0.1:{record['port']}"
        health, predict = record["routes"]
        return {"predictHttpUri": base + predict, "healthHttpUri": base + health}
    if psc_enabled(endpoint):
        return {"serviceAttachment": service_attachment(endpoint["name"])}
    return None


def service_attachment(endpoint_name: str) -> str:
    """A PSC endpoint's attachment as Vertex names it: in a tenant project, in its region."""
    parts = endpoint_name.split("/")
    return f"projects/vtx-local-tp/regions/{parts[3]}/serviceAttachments/sa-{parts[-1]}"


def machine_problems(machine_spec: dict, path: str) -> list[str]:
    """The catalog's rules of `vtx validate` on a deployed model's machine, over serving's
    machine list (`Catalog.for_serving`, as `vtx deploy` checks it): a known machine type, an
    accelerator it takes, in a count it allows."""
    facts = facts_from_rest_spec({"workerPoolSpecs": [{"machineSpec": machine_spec}]})
    catalog = load_catalog().for_serving()
    found = [*machine_type_known(facts, catalog), *accelerator_fits_machine(facts, catalog)]
    problems = []
    for problem in found:
        where = problem.path.replace("workerPoolSpecs[0]", path)
        hint = f" ({problem.hint})" if problem.hint else ""
        problems.append(f"{where}: {problem.message}{hint}")
    return problems


def resources_problems(deployed: dict) -> list[str]:
    """A deployed model of ours runs on dedicated resources: a machine, 1 <= min <= max."""
    if "automaticResources" in deployed or "dedicatedResources" not in deployed:
        return [
            "deployedModel.dedicatedResources: required: a model with a custom container "
            "supports DEDICATED_RESOURCES only (pass machine_type)"
        ]
    resources = deployed["dedicatedResources"]
    path = "deployedModel.dedicatedResources"
    problems = []
    machine = resources.get("machineSpec") or {}
    if not machine.get("machineType"):
        problems.append(f"{path}.machineSpec.machineType: required")
    else:
        problems += machine_problems(machine, path)
    low = int(resources.get("minReplicaCount", 0) or 0)
    high = int(resources.get("maxReplicaCount", 0) or 0)
    if low < 1:
        problems.append(f"{path}.minReplicaCount: must be at least 1")
    if high and high < low:
        problems.append(f"{path}.maxReplicaCount: {high} is below minReplicaCount {low}")
    return problems
