"""ListModels, ListModelVersions and ListEndpoints honour ``orderBy`` and ``readMask`` as their
request messages document them, through the SDK's own clients (``Model.list`` sends
``order_by``) and over REST."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import PARENT, init_sdk, rest


def upload(platform: StackOutputs, body: dict) -> str:
    code, operation = rest(platform, "POST", f"{PARENT}/models:upload", body)
    assert code == 200, operation
    return operation["name"].split("/operations/")[0]


def service(platform: StackOutputs, kind: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return getattr(aiplatform_v1, kind)(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": platform.vertex_endpoint},
    )


@pytest.fixture
def sdk(local_platform: StackOutputs):
    return init_sdk(local_platform)


def test_model_list_is_sorted_by_order_by_fields_with_desc(
    local_platform: StackOutputs, sdk
) -> None:
    from google.api_core import exceptions

    for name in ("ord-b", "ord-a", "ord-c"):  # created in this order
        upload(local_platform, {"model": {"displayName": name, "labels": {"batch": "ordering"}}})
    batch = 'labels.batch="ordering"'

    def names(order_by: str | None) -> list[str]:
        return [m.display_name for m in sdk.Model.list(filter=batch, order_by=order_by)]

    assert names(None) == ["ord-c", "ord-a", "ord-b"]  # newest first
    assert names("display_name") == ["ord-a", "ord-b", "ord-c"]
    assert names("display_name desc") == ["ord-c", "ord-b", "ord-a"]
    assert names("create_time") == ["ord-b", "ord-a", "ord-c"]
    assert names("update_time asc, display_name desc") == ["ord-b", "ord-a", "ord-c"]
    # Pages follow the order: the SDK's pager sends each nextPageToken back.
    models = service(local_platform, "ModelServiceClient")
    request = {"parent": PARENT, "filter": batch, "order_by": "display_name", "page_size": 1}
    assert [m.display_name for m in models.list_models(request=request)] == [
        "ord-a",
        "ord-b",
        "ord-c",
    ]
    with pytest.raises(exceptions.BadRequest, match="cannot order by 'state'"):
        sdk.Model.list(filter=batch, order_by="state")
    with pytest.raises(exceptions.BadRequest, match="not FIELD, FIELD asc or FIELD desc"):
        sdk.Model.list(filter=batch, order_by="display_name sideways")


def test_model_versions_are_sorted_by_their_update_times(local_platform: StackOutputs) -> None:
    from google.api_core import exceptions

    name = upload(local_platform, {"model": {"displayName": "versions-ordered"}})
    # No alias named: the first version keeps `default` and is not touched by the second.
    upload(local_platform, {"model": {"displayName": "versions-ordered"}, "parentModel": name})
    models = service(local_platform, "ModelServiceClient")

    def versions(order_by: str) -> list[str]:
        request = {"name": name, "order_by": order_by}
        return [v.version_id for v in models.list_model_versions(request=request)]

    assert versions("") == ["1", "2"]
    assert versions("update_time desc") == ["2", "1"]
    with pytest.raises(exceptions.BadRequest, match="supported fields are create_time"):
        versions("display_name")


def test_model_and_endpoint_lists_return_only_the_masked_fields(
    local_platform: StackOutputs,
) -> None:
    upload(local_platform, {"model": {"displayName": "masked", "labels": {"batch": "masks"}}})
    query = urllib.parse.urlencode(
        {"filter": 'labels.batch="masks"', "readMask": "displayName,labels"}
    )
    code, page = rest(local_platform, "GET", f"{PARENT}/models?{query}")
    assert code == 200
    assert page["models"] == [{"displayName": "masked", "labels": {"batch": "masks"}}]
    code, error = rest(local_platform, "GET", f"{PARENT}/models?readMask=nope")
    assert code == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    assert "no field nope" in error["error"]["message"]

    endpoint = {"displayName": "masked-endpoint", "labels": {"batch": "masks"}}
    assert rest(local_platform, "POST", f"{PARENT}/endpoints", endpoint)[0] == 200
    code, page = rest(local_platform, "GET", f"{PARENT}/endpoints?{query}")
    assert code == 200
    assert page["endpoints"] == [{"displayName": "masked-endpoint", "labels": {"batch": "masks"}}]
    code, error = rest(local_platform, "GET", f"{PARENT}/endpoints?readMask=nope")
    assert code == 400 and "no field nope" in error["error"]["message"]


def test_endpoint_list_is_sorted_by_order_by(local_platform: StackOutputs) -> None:
    from google.api_core import exceptions

    for name in ("ep-b", "ep-a", "ep-c"):
        body = {"displayName": name, "labels": {"batch": "endpoint-order"}}
        assert rest(local_platform, "POST", f"{PARENT}/endpoints", body)[0] == 200
    endpoints = service(local_platform, "EndpointServiceClient")

    def names(order_by: str) -> list[str]:
        request = {"parent": PARENT, "filter": 'labels.batch="endpoint-order"'}
        return [
            e.display_name
            for e in endpoints.list_endpoints(request={**request, "order_by": order_by})
        ]

    assert names("") == ["ep-c", "ep-a", "ep-b"]
    assert names("display_name") == ["ep-a", "ep-b", "ep-c"]
    assert names("create_time desc") == ["ep-c", "ep-a", "ep-b"]
    assert names("displayName desc") == ["ep-c", "ep-b", "ep-a"]
    with pytest.raises(exceptions.BadRequest, match="cannot order by 'labels'"):
        names("labels")
