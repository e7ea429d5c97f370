"""Model Registry reads over plain REST (``vtx model list|show``, and the checks before an
upload): ModelService v1's get, list and listVersions as REST JSON, with
`jobs.vertex.rest.VertexRest`'s session, retries and explained errors, and no aiplatform import.

Models are regional: they are read in the stack's own region (``vtx model upload`` registers
there). A model is named by its id or its full resource name, optionally with ``@VERSION`` (a
version id or alias), as Vertex's GetModel takes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.vertex.job_records import rfc3339
from jobs.vertex.locations import parent
from jobs.vertex.rest import VertexRest


@dataclass(frozen=True)
class ModelRecord:
    """One model version as the REST API returns it, read once into what vtx prints."""

    name: str
    version_id: str
    aliases: list[str]
    display_name: str
    artifact_uri: str
    image: str
    labels: dict[str, str]
    created: str
    rest: dict = field(repr=False)

    @property
    def model_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @classmethod
    def from_rest(cls, model: dict) -> ModelRecord:
        when = rfc3339(model.get("versionCreateTime") or model.get("createTime"))
        return cls(
            name=str(model.get("name", "")),
            version_id=str(model.get("versionId", "")),
            aliases=[str(a) for a in model.get("versionAliases", [])],
            display_name=str(model.get("displayName", "")),
            artifact_uri=str(model.get("artifactUri", "")),
            image=str((model.get("containerSpec") or {}).get("imageUri", "")),
            labels={str(k): str(v) for k, v in (model.get("labels") or {}).items()},
            created=when.strftime("%Y-%m-%d %H:%M:%S") if when else "",
            rest=model,
        )


class ModelRest(VertexRest):
    """GetModel, ListModels and ListModelVersions in the stack's region."""

    def model_name(self, ref: str) -> str:
        """A full resource name from an id or a full name (``@VERSION`` kept)."""
        if ref.startswith("projects/"):
            return ref
        return f"{parent(self.stack)}/models/{ref}"

    def get_model(self, ref: str) -> ModelRecord:
        return ModelRecord.from_rest(self._request("GET", self.model_name(ref)))

    def list_models(self, filter: str = "") -> list[ModelRecord]:
        """Every model of the region (its default version), newest first as Vertex lists."""
        return self._pages(f"{parent(self.stack)}/models", filter)

    def list_versions(self, ref: str) -> list[ModelRecord]:
        return self._pages(f"{self.model_name(ref)}:listVersions", "")

    def _pages(self, path: str, filter: str) -> list[ModelRecord]:
        params = {"filter": filter} if filter else {}
        return [ModelRecord.from_rest(m) for m in self.listed_at(path, "models", params)]
