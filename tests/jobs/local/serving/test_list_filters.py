"""The ``filter`` of ListEndpoints (and the label forms ListModels shares) against what the v1
discovery document's description of the parameter lists, and ``Endpoint.list(filter=...)``
through the real SDK."""

from __future__ import annotations

import re

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.serving.model_filters import (
    ENDPOINT_FIELDS,
    MODEL_FIELDS,
    ModelFilterError,
    parse_model_filter,
)
from tests.jobs.local.local_helpers import PARENT, init_sdk, rest
from tests.vertex_discovery import method

NAME = "projects/1/locations/us-central1/endpoints/"
SUPPORTS = re.compile(r"`(\w+)` (only )?supports ((?:`[^`]+`(?: and |, )?)+)")
UNSERVED = {"base_model_name"}  # Model Garden: which field it compares is not documented


def _described(resource: str) -> dict[str, list[str]]:
    """field -> its operators, as the discovery document's filter description lists them."""
    text = method(resource, "list")["parameters"]["filter"]["description"]
    return {m[1]: re.findall(r"`([^`]+)`", m[3]) for m in SUPPORTS.finditer(text)}


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


def _endpoint(number: str, display: str = "e", labels: dict | None = None) -> dict:
    return {"name": NAME + number, "displayName": display, "labels": labels or {}}


def test_every_field_and_operator_the_description_lists_is_served_or_refused_by_name() -> None:
    described = _described("endpoints")
    assert set(described) == {"endpoint", "display_name", "base_model_name"}
    one, two = _endpoint("1", "one"), _endpoint("2", "two")
    values = {"endpoint": "1", "display_name": "one"}
    for field, operators in described.items():
        for name in {field, _camel(field)}:  # "both snake_case and camelCase are supported"
            for op in operators:
                text = f'{name}{op}"{values.get(field, "x")}"'
                if field in UNSERVED:
                    with pytest.raises(ModelFilterError, match="Model Garden"):
                        parse_model_filter(text, ENDPOINT_FIELDS)
                    continue
                matches = parse_model_filter(text, ENDPOINT_FIELDS)
                assert (matches(one), matches(two)) == (
                    (True, False) if op == "=" else (False, True)
                )


def test_the_descriptions_examples_and_label_forms_parse() -> None:
    text = method("endpoints", "list")["parameters"]["filter"]["description"]
    for form in ("`labels.key=value`", "`labels.key:*` or `labels:key`", '`labels."a key"`'):
        assert form in text
    examples = re.findall(r"\* `([\w.]+=[^`]+)`", text)
    assert "endpoint=1" in examples and 'labels.myKey="myValue"' in examples
    labelled = _endpoint("1", "myDisplayName", {"myKey": "myValue", "key": "value", "a key": "v"})
    for example in examples:
        if example.startswith("baseModelName"):
            continue
        assert parse_model_filter(example, ENDPOINT_FIELDS)(labelled), example
    for fields in (ENDPOINT_FIELDS, MODEL_FIELDS):
        assert parse_model_filter("labels:myKey", fields)(labelled)
        assert not parse_model_filter("labels:other", fields)(labelled)
        assert parse_model_filter("labels.myKey:*", fields)(labelled)
        assert parse_model_filter('labels."a key"="v"', fields)(labelled)
        assert parse_model_filter('labels."a key":*', fields)(labelled)
    with pytest.raises(ModelFilterError, match="labels:KEY"):
        parse_model_filter('labels="x"', ENDPOINT_FIELDS)
    with pytest.raises(ModelFilterError, match="cannot filter on 'model'"):
        parse_model_filter("model=1", ENDPOINT_FIELDS)


def test_endpoint_list_filters_by_endpoint_id_through_the_sdk(local_platform: StackOutputs) -> None:
    from google.api_core import exceptions

    sdk = init_sdk(local_platform)
    labels = {"batch": "endpoint-filter"}
    made = [
        rest(local_platform, "POST", f"{PARENT}/endpoints", {"displayName": n, "labels": labels})
        for n in ("ep-one", "ep-two")
    ]
    assert [code for code, _ in made] == [200, 200]
    ids = [
        e.name
        for e in sdk.Endpoint.list(filter='labels.batch="endpoint-filter"', order_by="display_name")
    ]
    assert len(ids) == 2
    found = sdk.Endpoint.list(filter=f"endpoint={ids[0]}")
    assert [(e.name, e.display_name) for e in found] == [(ids[0], "ep-one")]
    others = sdk.Endpoint.list(filter=f'endpoint!={ids[0]} AND labels.batch="endpoint-filter"')
    assert [e.name for e in others] == [ids[1]]
    assert [e.name for e in sdk.Endpoint.list(filter="labels:batch AND endpoint=" + ids[1])] == [
        ids[1]
    ]
    with pytest.raises(exceptions.BadRequest, match="Model Garden"):
        sdk.Endpoint.list(filter='baseModelName="text-bison"')
