"""jobs/local/serving/models.py over a store, without a server: versions and aliases as Vertex keeps
them, what survives a control-plane restart, and what `register` refuses."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


class SlowReadingStore(Store):
    """A store whose reads of a model's versions let other threads run before the caller goes
    on: the window in which two uploads both read the same versions is made wide, not hoped for."""

    def model_versions(self, model: str) -> list[tuple[int, dict]]:
        versions = super().model_versions(model)
        time.sleep(0.02)
        return versions


def _at_once(calls: int, call: Callable[[], object]) -> list[object]:
    """Each call's result, or the ModelError it raised; all started together."""
    start = threading.Barrier(calls)

    def one(_: int) -> object:
        start.wait()
        try:
            return call()
        except ModelError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=calls) as pool:
        return list(pool.map(one, range(calls)))


def test_concurrent_registers_take_distinct_versions_and_one_model_id(tmp_path: Path) -> None:
    models = Models(SlowReadingStore(tmp_path / "jobs.sqlite"))
    first = models.register(PARENT, model())
    added = _at_once(12, lambda: models.register(PARENT, model(), parent_model=first["name"]))
    assert sorted(int(v["versionId"]) for v in added if isinstance(v, dict)) == list(range(2, 14))
    ref = ModelRef.parse(PARENT, first["name"].rsplit("/", 1)[-1])
    assert len(models.versions(ref, "")) == 13

    created = _at_once(8, lambda: models.register(PARENT, model(), model_id="one_id"))
    refused = [r for r in created if isinstance(r, ModelError)]
    assert len(created) - len(refused) == 1
    assert {(r.http_code, r.status) for r in refused} == {(409, "ALREADY_EXISTS")}
