"""The three fields of the newest v1 discovery revision that the installed protos lack: the
evidence (the discovery document has them, the installed SDK does not), and the control plane's
answer to a request that carries one (a 400 naming the field, the SDK version and what to write
instead)."""

from __future__ import annotations

from importlib import metadata

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.api.newer_fields import NEWER_FIELDS
from tests.jobs.local.local_helpers import PARENT, rest
from tests.vertex_discovery import schema_fields


def _installed_fields(message: str) -> set[str]:
    from google.cloud import aiplatform_v1

    proto = getattr(aiplatform_v1, message)
    return {f.json_name for f in proto.pb(proto()).DESCRIPTOR.fields}


@pytest.mark.parametrize(("message", "field"), sorted(NEWER_FIELDS))
def test_the_discovery_document_has_the_field_and_the_installed_protos_do_not(
    message: str, field: str
) -> None:
    """When an SDK release defines one, this fails: serve the field then, instead of refusing."""
    assert field in schema_fields(message)
    assert field not in _installed_fields(message), metadata.version("google-cloud-aiplatform")


def _refused(platform: StackOutputs, path: str, body: dict, named: str) -> str:
    code, answer = rest(platform, "POST", path, body)
    assert code == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    text = answer["error"]["message"]
    assert named in text and metadata.version("google-cloud-aiplatform") in text
    return text


def test_a_request_with_one_is_refused_with_its_reason(local_platform: StackOutputs) -> None:
    gdc = {"displayName": "gdc", "gdcConfig": {"zone": "us-east1-gdc"}}
    text = _refused(local_platform, f"{PARENT}/endpoints", gdc, "Endpoint.gdcConfig")
    assert "create the endpoint without it" in text

    code, endpoint = rest(local_platform, "POST", f"{PARENT}/endpoints", {"displayName": "plain"})
    assert code == 200
    name = endpoint["name"].split("/operations/")[0]
    deployed = {"deployedModel": {"gdcConnectedModel": "gemini-1.5-flash-002"}}
    text = _refused(
        local_platform, f"{name}:deployModel", deployed, "DeployedModel.gdcConnectedModel"
    )
    assert "deployedModel.model" in text

    uploaded = {"model": {"displayName": "m", "deployedModels": [{"checkpointId": "7"}]}}
    text = _refused(
        local_platform, f"{PARENT}/models:upload", uploaded, "DeployedModelRef.checkpointId"
    )
    assert "output only" in text


def test_any_other_unknown_field_keeps_the_parsers_answer(local_platform: StackOutputs) -> None:
    code, answer = rest(local_platform, "POST", f"{PARENT}/endpoints", {"displayName": "x", "n": 1})
    assert code == 400
    assert answer["error"]["message"].startswith("Invalid JSON payload received.")
