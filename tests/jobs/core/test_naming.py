"""What names a resource is judged in one place (jobs/core/naming.py), and every check that
judges a display name says the same thing."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from jobs.core.naming import (
    RFC1035_NAME,
    display_name_problem,
    label_key_problem,
    label_value,
    label_value_problem,
    labels_count_problem,
    rfc1035_name,
    rfc1035_pattern,
)
from jobs.local.custom_jobs.pipelines import custom_job_spec_problems
from jobs.local.serving.endpoint_checks import endpoint_problems
from jobs.local.serving.models import model_problems
from jobs.local.tuning.study_checks import study_problems


@pytest.mark.parametrize("name", ["a", "a-1", "reservation-7", "a" * 63])
def test_an_rfc1035_name_is_accepted(name: str) -> None:
    assert RFC1035_NAME.fullmatch(name)


@pytest.mark.parametrize("name", ["", "1a", "-a", "a-", "A", "a_b", "a.b", "a" * 64])
def test_what_rfc1035_refuses_is_refused(name: str) -> None:
    assert not RFC1035_NAME.fullmatch(name)


def test_a_shorter_rfc1035_rule_stops_at_its_length() -> None:
    short = re.compile(rfc1035_pattern(52))
    assert short.fullmatch("a" * 52)
    assert not short.fullmatch("a" * 53)


def test_a_display_name_has_1_to_128_characters() -> None:
    assert display_name_problem("x") is None
    assert display_name_problem("x" * 128) is None
    assert display_name_problem("") == "empty; a display name has 1 to 128 characters"
    too_long = "129 characters; a display name has 1 to 128 characters"
    assert display_name_problem("x" * 129) == too_long


SITES: list[tuple[str, Callable[[str], list[str]]]] = [
    ("endpoint.displayName", lambda name: endpoint_problems({"displayName": name}, None)),
    ("model.displayName", lambda name: model_problems({"displayName": name})),
    ("displayName", lambda name: study_problems({"displayName": name})),
    ("displayName", lambda name: custom_job_spec_problems({"displayName": name})),
]


@pytest.mark.parametrize(("field", "problems_of"), SITES)
@pytest.mark.parametrize("name", ["", "x" * 129])
def test_every_check_of_a_display_name_says_the_one_message(
    field: str, problems_of: Callable[[str], list[str]], name: str
) -> None:
    assert f"{field}: {display_name_problem(name)}" in problems_of(name)


@pytest.mark.parametrize("key", ["team", "a", "cost-center_2", "a" * 63])
def test_a_label_key_is_accepted(key: str) -> None:
    assert label_key_problem(key) is None


@pytest.mark.parametrize("key", ["", "Team", "2team", "a.b", "a" * 64, "team\n"])
def test_what_a_label_key_may_not_be_is_refused(key: str) -> None:
    assert label_key_problem(key) == (
        f"invalid label key {key!r}: lower case letters, digits, '_' and '-', starting with a "
        "letter, at most 63 characters"
    )


@pytest.mark.parametrize("value", ["", "ml", "2026-11", "a_b", "a" * 63])
def test_a_label_value_is_accepted(value: str) -> None:
    assert label_value_problem(value) is None


@pytest.mark.parametrize("value", ["ML", "a.b", "a b", "a" * 64, "ml\n"])
def test_what_a_label_value_may_not_be_is_refused(value: str) -> None:
    assert label_value_problem(value) == (
        f"invalid label value {value!r}: lower case letters, digits, '_' and '-', at most 63 "
        "characters"
    )


def test_at_most_64_labels() -> None:
    assert labels_count_problem({f"k{i}": "v" for i in range(64)}) is None
    assert labels_count_problem({f"k{i}": "v" for i in range(65)}) == "more than 64 labels"


@pytest.mark.parametrize(
    ("text", "value"),
    [("prod", "prod"), ("Prod Env", "prod-env"), ("eu.west/4", "eu-west-4"), ("x" * 70, "x" * 63)],
)
def test_any_text_becomes_a_label_value_vertex_takes(text: str, value: str) -> None:
    assert label_value(text) == value
    assert label_value_problem(label_value(text)) is None


@pytest.mark.parametrize(
    ("text", "most", "name"),
    [
        ("My Job_v2", 40, "my-job-v2"),
        ("  Llama 3 / LoRA  ", 40, "llama-3-lora"),
        ("7b-chat", 40, "job-7b-chat"),
        ("", 40, "job"),
        ("!!!", 40, "job"),
        ("a" * 39 + " tail", 40, "a" * 39),  # cut, and no '-' left at the end
    ],
)
def test_any_text_becomes_an_rfc1035_name(text: str, most: int, name: str) -> None:
    assert rfc1035_name(text, most, "job") == name
    assert re.fullmatch(rfc1035_pattern(most), name)
