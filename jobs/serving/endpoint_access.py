"""Who reaches a deployed model: public endpoints, or private ones on a stack that asks for them
(``private_serving`` in its outputs, ``serving.private`` in its config).

Vertex's two kinds of private endpoint (aiplatform_v1 ``Endpoint``; docs/vertex-facts.md,
"Private endpoints"):
- peering: ``Endpoint.network`` names the peered VPC (project *number*); the model is called on
  the deployed model's ``privateEndpoints.predictHttpUri`` from inside the VPC. Google's guide:
  one model per private endpoint, no traffic split.
- psc: ``privateServiceConnectConfig{enablePrivateServiceConnect, projectAllowlist}``; once a
  model is deployed Vertex fills ``serviceAttachment``, and a forwarding rule in the VPC (the
  stack's ``serving.psc_consumers``) makes it reachable at an internal address.
``network`` and ``privateServiceConnectConfig`` are mutually exclusive (endpoint.proto)."""

from __future__ import annotations

from jobs.core.naming import rfc1035_name
from jobs.core.stack import PSC_CONSUMER_NAME_MAX, StackOutputs
from jobs.serving.endpoint_rest import EndpointRecord


def new_endpoint_fields(stack: StackOutputs) -> dict:
    """What a new endpoint of this stack carries besides its name and labels."""
    private = stack.private_serving
    if private is None:
        return {}
    if private.kind == "peering":
        return {"network": private.network}
    return {
        "privateServiceConnectConfig": {
            "enablePrivateServiceConnect": True,
            "projectAllowlist": list(private.project_allowlist),
        }
    }


def access_of(endpoint: dict) -> str:
    """ "public", "private (VPC peering)" or "private (Private Service Connect)"."""
    if endpoint.get("network"):
        return "private (VPC peering)"
    if (endpoint.get("privateServiceConnectConfig") or {}).get("enablePrivateServiceConnect"):
        return "private (Private Service Connect)"
    return "public"


def access_problems(stack: StackOutputs, endpoint: EndpointRecord | None) -> list[str]:
    """What a private stack refuses of an existing endpoint: a public one, or a second model
    on a peering one (a new endpoint is made as the stack wants it)."""
    private = stack.private_serving
    if private is None or endpoint is None:
        return []
    wanted = access_of(new_endpoint_fields(stack))
    if access_of(endpoint.rest) != wanted:
        return [
            f"--endpoint {endpoint.display_name}: endpoint {endpoint.endpoint_id} is "
            f"{access_of(endpoint.rest)}, and stack {stack.project} ({stack.environment}) serves "
            f"models {wanted} only; name another endpoint, or a new display name to create one"
        ]
    if private.kind == "peering" and endpoint.deployed:
        return [
            f"--endpoint {endpoint.display_name}: a private endpoint over VPC peering serves one "
            f"model and it has one ({endpoint.deployed[0].id}); `vtx undeploy "
            f"{endpoint.endpoint_id} --all` first, or name a new endpoint"
        ]
    return []


def consumer_name(display_name: str) -> str:
    """A PSC consumer's name for an endpoint: its display name as an RFC 1035 name."""
    return rfc1035_name(display_name, PSC_CONSUMER_NAME_MAX, "endpoint")


def service_attachment(endpoint: dict) -> str | None:
    """The attachment Vertex made for a PSC endpoint (set once a model is deployed)."""
    config = endpoint.get("privateServiceConnectConfig") or {}
    found = config.get("serviceAttachment")
    if found:
        return str(found)
    for deployed in endpoint.get("deployedModels", []):
        found = (deployed.get("privateEndpoints") or {}).get("serviceAttachment")
        if found:
            return str(found)
    return None


def consumer_hint(stack: StackOutputs, endpoint: dict) -> str | None:
    """For a PSC endpoint: the stack config entry that gives the VPC an address for it."""
    attachment = service_attachment(endpoint)
    if attachment is None or stack.private_serving is None:
        return None
    name = consumer_name(str(endpoint.get("displayName", "")))
    return (
        f"reach it from the VPC: add to vtx:platform.serving.psc_consumers in the stack config\n"
        f"  - name: {name}\n    service_attachment: {attachment}\n"
        f"then review and `pulumi up` the stack (an internal address and a forwarding rule)"
    )


def reach_lines(stack: StackOutputs, endpoint: dict) -> list[str]:
    """How a private endpoint is called, once deployed to: the peering URIs, or the VPC's PSC
    address for it (or the stack config entry that makes one)."""
    lines = []
    for deployed in endpoint.get("deployedModels", []):
        uri = (deployed.get("privateEndpoints") or {}).get("predictHttpUri")
        if uri:
            lines.append(f"predict from inside the VPC: POST {uri}")
    private = stack.private_serving
    attachment = service_attachment(endpoint)
    if attachment is None or private is None or private.kind != "psc":
        return lines
    name = consumer_name(str(endpoint.get("displayName", "")))
    address = private.psc_consumers.get(name)
    if address is not None:
        return [*lines, f"from inside the VPC: PSC endpoint {name} at {address} -> {attachment}"]
    return [*lines, consumer_hint(stack, endpoint) or ""]
