"""Endpoints over plain REST (``vtx endpoint list|show``, ``vtx predict`` and the checks before a
deploy or undeploy): EndpointService v1's get and list and PredictionService v1's ``:predict``
as REST JSON, with `jobs.vertex.rest.VertexRest`'s session, retries and explained errors, and no
aiplatform import.

Endpoints are regional: they are read in the stack's own region (``vtx deploy`` creates them
there). An endpoint is named by its numeric id or its full resource name; `vtx deploy` also
takes a display name (``find``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.vertex.errors import NOT_FOUND, VertexError, explain_status
from jobs.vertex.job_records import json_int, rfc3339
from jobs.vertex.locations import parent
from jobs.vertex.rest import VertexRest

PREDICT_TIMEOUT_S = 600.0
"""Generation on a small serving machine can take minutes; Vertex's own limit is 600 s."""
PREDICT_REQUEST_MAX_BYTES = 1_572_864
"""1.5 MiB: Vertex's limit on a prediction request (docs/vertex-facts.md, "Serving containers";
the serving container refuses more too, trainer/serving/request.py): `vtx predict` reads an
instances file up to this, since one request could not carry more."""


@dataclass(frozen=True)
class DeployedModelRecord:
    """One DeployedModel of an endpoint, read once into what vtx prints and re-splits."""

    id: str
    model: str
    """The model's resource name (without the version)."""
    version_id: str
    display_name: str
    machine: str
    accelerator: str | None
    accelerator_count: int
    min_replicas: int
    max_replicas: int
    service_account: str

    @classmethod
    def from_rest(cls, deployed: dict) -> DeployedModelRecord:
        resources = deployed.get("dedicatedResources") or {}
        spec = resources.get("machineSpec") or {}
        accelerator = spec.get("acceleratorType")
        if accelerator in (None, "", "ACCELERATOR_TYPE_UNSPECIFIED"):
            accelerator = None
        model, _, version = str(deployed.get("model", "")).partition("@")
        return cls(
            id=str(deployed.get("id", "")),
            model=model,
            version_id=str(deployed.get("modelVersionId") or version),
            display_name=str(deployed.get("displayName", "")),
            machine=str(spec.get("machineType", "")),
            accelerator=accelerator,
            accelerator_count=json_int(spec.get("acceleratorCount")) if accelerator else 0,
            min_replicas=json_int(resources.get("minReplicaCount"), 1),
            max_replicas=json_int(resources.get("maxReplicaCount"), 0)
            or json_int(resources.get("minReplicaCount"), 1),
            service_account=str(deployed.get("serviceAccount", "")),
        )


@dataclass(frozen=True)
class EndpointRecord:
    """An Endpoint as the REST API returns it: its deployed models and traffic split."""

    name: str
    display_name: str
    deployed: list[DeployedModelRecord]
    traffic: dict[str, int]
    """Deployed model id -> percent of the endpoint's traffic (Vertex's ``trafficSplit``)."""
    labels: dict[str, str]
    created: str
    rest: dict = field(repr=False)

    @property
    def endpoint_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    def deployed_model(self, deployed_id: str) -> DeployedModelRecord | None:
        return next((d for d in self.deployed if d.id == deployed_id), None)

    @classmethod
    def from_rest(cls, endpoint: dict) -> EndpointRecord:
        when = rfc3339(endpoint.get("createTime"))
        return cls(
            name=str(endpoint.get("name", "")),
            display_name=str(endpoint.get("displayName", "")),
            deployed=[DeployedModelRecord.from_rest(d) for d in endpoint.get("deployedModels", [])],
            traffic={str(k): json_int(v) for k, v in (endpoint.get("trafficSplit") or {}).items()},
            labels={str(k): str(v) for k, v in (endpoint.get("labels") or {}).items()},
            created=when.strftime("%Y-%m-%d %H:%M:%S") if when else "",
            rest=endpoint,
        )


class EndpointRest(VertexRest):
    """GetEndpoint, ListEndpoints and Predict in the stack's region."""

    def endpoint_name(self, ref: str) -> str:
        """A full resource name from a numeric id or a full name."""
        if ref.startswith("projects/"):
            return ref
        return f"{parent(self.stack)}/endpoints/{ref}"

    def get_endpoint(self, ref: str) -> EndpointRecord:
        return EndpointRecord.from_rest(self._request("GET", self.endpoint_name(ref)))

    def list_endpoints(self, filter: str = "") -> list[EndpointRecord]:
        params = {"filter": filter} if filter else {}
        listed = self.listed_at(f"{parent(self.stack)}/endpoints", "endpoints", params)
        return [EndpointRecord.from_rest(e) for e in listed]

    def find(self, ref: str) -> list[EndpointRecord]:
        """The endpoints ``ref`` names: by id or full name (one, or a 404 VertexError), else
        every endpoint with that display name (checked here too: a server may ignore filters)."""
        if ref.startswith("projects/") or ref.isdigit():
            return [self.get_endpoint(ref)]
        named = self.list_endpoints(f'display_name="{ref}"')
        return [e for e in named if e.display_name == ref]

    def resolve(self, ref: str) -> str:
        """The resource name of the endpoint ``ref`` names: a numeric id or full name as it is;
        else the one endpoint with that display name (`vtx deploy --endpoint NAME` creates
        endpoints by name), else the endpoint with that id (an ``endpointId`` chosen at
        creation may be letters). VertexError when none has it, or when several have that
        display name (their ids listed)."""
        if ref.startswith("projects/") or ref.isdigit():
            return self.endpoint_name(ref)
        found = self.find(ref)
        if len(found) > 1:
            ids = ", ".join(e.endpoint_id for e in found)
            raise VertexError(
                f"endpoint {ref}: {len(found)} endpoints have that display name ({ids}): name "
                f"one by id (see `vtx endpoint list`)",
                400,
            )
        if found:
            return found[0].name
        try:
            return self.get_endpoint(ref).name
        except VertexError as err:
            if err.http_code != NOT_FOUND:
                raise
            raise VertexError(
                f"endpoint {ref}: no endpoint has that display name or id in "
                f"{parent(self.stack)} (see `vtx endpoint list`)",
                NOT_FOUND,
            ) from err

    def predict(self, ref: str, instances: list[Any], parameters: Any = None) -> dict:
        """PredictionService ``:predict``: ``{"predictions": [...], "deployedModelId": ...}``.
        Transient answers (429, 503: replicas still starting or scaling) are retried with
        backoff; the rest are explained in a prediction's words (the endpoint, the container)."""
        name = self.endpoint_name(ref)
        body: dict[str, Any] = {"instances": instances}
        if parameters is not None:
            body["parameters"] = parameters
        response = self.call(
            "POST",
            f"{name}:predict",
            json=body,
            timeout=PREDICT_TIMEOUT_S,
            explained=lambda code, said: predict_error(code, said, name, self),
            what="error on predict",
        )
        return response.json()


def predict_error(code: int, said: str, endpoint: str, rest: VertexRest) -> VertexError:
    """A failed ``:predict`` explained: what the answer means for a prediction."""
    if code == NOT_FOUND:
        return VertexError(
            f"endpoint {endpoint} not found (or it has no deployed model): see `vtx endpoint "
            f"list`. Vertex said: {said}",
            NOT_FOUND,
        )
    if code == 400:
        return VertexError(
            f"the model refused the instances (HTTP 400): {said}. Check them against what the "
            f'serving container takes (trainer/serve.py: a prompt string or {{"prompt": ...}} '
            f"per instance)",
            code,
        )
    if code == 503:
        return VertexError(
            f"endpoint {endpoint} is unavailable (HTTP 503): its replicas are starting, scaling "
            f"or crashed; see `vtx endpoint show` and the serving logs, then try again. Vertex "
            f"said: {said}",
            code,
        )
    return explain_status(code, said, rest.stack)
