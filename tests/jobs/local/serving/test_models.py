"""jobs/local/serving/models.py over a store, without a server: versions and aliases as Vertex keeps
them, what survives a control-plane restart, and what `register` refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.local.platform.store import Store
from jobs.local.serving.models import ModelError, ModelRef, Models

PARENT = "projects/424242424242/locations/us-central1"


def model(**fields: object) -> dict:
    return {"displayName": "m", "containerSpec": {"imageUri": "serve:1"}, **fields}


def test_the_first_version_is_default_and_a_later_one_takes_the_aliases_it_names(
    tmp_path: Path,
) -> None:
    models = Models(Store(tmp_path / "jobs.sqlite"))
    first = models.register(PARENT, model(versionAliases=["prod"]))
    assert (first["versionId"], first["versionAliases"]) == ("1", ["prod", "default"])
    second = models.register(PARENT, model(versionAliases=["prod"]), parent_model=first["name"])
    third = models.register(PARENT, model(), parent_model=first["name"])
    ref = ModelRef.parse(PARENT, first["name"].rsplit("/", 1)[-1])
    aliases = [(v["versionId"], v["versionAliases"]) for _, v in models.versions(ref, "")]
    assert aliases == [("1", ["default"]), ("2", ["prod"]), ("3", [])]
    assert second["createTime"] == third["createTime"] == first["createTime"]
    assert models.get(ref)["versionId"] == "1"


def test_models_and_operations_survive_a_restart_of_the_control_plane(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.sqlite")
    operation = Models(store).upload(PARENT, model(), None, "tiny_sft")
    store.close()
    again = Models(Store(tmp_path / "jobs.sqlite"))
    assert again.get(ModelRef.parse(PARENT, "tiny_sft@default"))["versionId"] == "1"
    assert again.operation(operation["name"])["done"] is True


def test_register_refuses_what_vertex_would(tmp_path: Path) -> None:
    models = Models(Store(tmp_path / "jobs.sqlite"))
    models.register(PARENT, model(), model_id="taken")
    with pytest.raises(ModelError, match="already exists: pass it as parentModel") as exc:
        models.register(PARENT, model(), model_id="taken")
    assert exc.value.http_code == 409
    with pytest.raises(ModelError, match="modelId: '9lives': up to 63"):
        models.register(PARENT, model(), model_id="9lives")
    with pytest.raises(ModelError, match="does not exist") as exc:
        models.register(PARENT, model(), parent_model=f"{PARENT}/models/absent")
    assert exc.value.http_code == 404
    with pytest.raises(ModelError, match=r"containerSpec\.imageUri: required"):
        models.register(PARENT, {"displayName": "m", "containerSpec": {}})


def test_the_only_version_and_the_default_one_cannot_be_deleted_alone(tmp_path: Path) -> None:
    models = Models(Store(tmp_path / "jobs.sqlite"))
    first = models.register(PARENT, model(), model_id="two")
    with pytest.raises(ModelError, match="only version: delete the model"):
        models.delete_version(ModelRef.parse(PARENT, "two@1"))
    models.register(PARENT, model(versionAliases=["next"]), parent_model=first["name"])
    with pytest.raises(ModelError, match="holds the default alias"):
        models.delete_version(ModelRef.parse(PARENT, "two@default"))
    models.delete_version(ModelRef.parse(PARENT, "two@next"))
    assert [v["versionId"] for _, v in models.versions(ModelRef.parse(PARENT, "two"), "")] == ["1"]
