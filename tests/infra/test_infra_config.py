"""vtx:platform validation: each mistake fails before any resource, with its key path and a fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from infra.components.capacity.quotas import quota_target
from infra.config import (
    CapacityRegion,
    ConfigError,
    PlatformConfig,
    QuotaRequest,
    StackConfig,
    TeamBudget,
    load_stack_config,
    read_stack_file,
)
from jobs.core.stack import is_production

PROJECT_DIR = Path(__file__).resolve().parents[2]


def stack_values(stack: str) -> dict[str, Any]:
    return read_stack_file(PROJECT_DIR / f"Pulumi.{stack}.yaml")


def set_in(values: dict[str, Any], path: str, value: Any) -> None:
    """Set ``vtx:platform`` key ``a.b[0].c`` in a stack's raw config."""
    node: Any = values["vtx:platform"]
    parts = path.replace("[", ".").replace("]", "").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


DELETE = object()


def mutated(stack: str, *changes: tuple[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    for path, value in changes:
        set_in(values, path, value)
    return values


def problems_of(values: dict[str, Any]) -> list[Any]:
    with pytest.raises(ConfigError) as info:
        load_stack_config(values, "Pulumi.test.yaml")
    return info.value.problems


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_real_stack_files_are_valid(stack: str) -> None:
    config = load_stack_config(stack_values(stack), f"Pulumi.{stack}.yaml")
    assert config.platform.environment == stack


@pytest.mark.parametrize("cancel_at", [0.9, 1.0, 1.5, None])
def test_a_team_cancels_at_one_of_its_thresholds_above_them_all_or_never(
    cancel_at: float | None,
) -> None:
    values = mutated("prod", ("teams[0].cancel_at", cancel_at))
    config = load_stack_config(values, "Pulumi.test.yaml")
    assert config.platform.teams[0].cancel_at == cancel_at


# (stack, changes, expected key path, fragment of the message or hint)
CASES: list[tuple[str, list[tuple[str, Any]], str, str]] = [
    ("dev", [("network.subnet_cidr", "10.10.0.0/33")], "network.subnet_cidr", "not an IPv4 CIDR"),
    ("dev", [("network.subnet_cidr", "10.10.0.1/20")], "network.subnet_cidr", "host bits"),
    ("dev", [("network.subnet_cidr", "8.8.0.0/16")], "network.subnet_cidr", "not a private"),
    ("dev", [("network.peering_cidr", "172.16.0.0/20")], "network.peering_cidr", "172.16.0.0/16"),
    ("dev", [("network.subnet_cidr", "172.0.0.0/8")], "network.subnet_cidr", "not a private"),
    ("prod", [("network.psc_subnet_cidr", "172.16.8.0/28")], "network.psc_subnet_cidr", "reserves"),
    ("dev", [("network.peering_cidr", "10.10.4.0/24")], "network.peering_cidr", "overlaps"),
    ("dev", [("network.peering_cidr", "10.20.0.0/26")], "network.peering_cidr", "/16 to /24"),
    ("dev", [("network.peering_cidr", DELETE)], "network.peering_cidr", "required in mode peering"),
    ("dev", [("network.psc_subnet_cidr", "10.99.0.0/28")], "network.psc_subnet_cidr", "only used"),
    ("prod", [("network.psc_subnet_cidr", "10.31.0.0/29")], "network.psc_subnet_cidr", "/28"),
    ("prod", [("network.mode", "vpn")], "network.mode", "psc-interface"),
    ("dev", [("quotas[0].accelerator", "NVIDIA_K80")], "quotas[0].accelerator", "NVIDIA_L4"),
    ("dev", [("quotas[0].count", -1)], "quotas[0].count", "greater than or equal to 0"),
    ("dev", [("quotas[0].count", "lots")], "quotas[0].count", "valid integer"),
    ("prod", [("quotas[2].accelerator", "NVIDIA_H100_80GB")], "quotas[2]", "same accelerator"),
    ("dev", [("quota_contact_email", DELETE)], "quota_contact_email", "required when quotas"),
    ("prod", [("cmek", False)], "cmek", "set cmek: true"),
    ("prod", [("registry.immutable_tags", False)], "registry.immutable_tags", "immutable"),
    ("prod", [("storage.location", "EU")], "storage.location", "CMEK key"),
    ("dev", [("storage.soft_delete_days", 3)], "storage.soft_delete_days", "7..90"),
    ("dev", [("storage.colour", "blue")], "storage.colour", "soft_delete_days"),
    ("dev", [("environment", DELETE)], "environment", "required key is missing"),
    ("dev", [("prefix", "Acme_VTX")], "prefix", "resource name prefix"),
    ("dev", [("prefix", "a-prefix-far-too-long-for-ids")], "prefix", "resource name prefix"),
    ("dev", [("labels.Team", "x")], "labels", "label key"),
    ("prod", [("budget.billing_account", "1234")], "budget.billing_account", "0A1B2C"),
    ("prod", [("budget.monthly_amount", 0)], "budget.monthly_amount", "greater than 0"),
    ("dev", [("secrets", ["hf-token", "hf-token"])], "secrets", "twice"),
    ("prod", [("budget", DELETE)], "teams", "budget.billing_account"),
    ("prod", [("teams[0].name", "NLP_team")], "teams[0].name", "team name"),
    ("prod", [("teams[0].name", "n" * 31)], "teams[0].name", "at most 30"),
    ("prod", [("teams[1].name", "nlp")], "teams[1].name", "listed already, at teams[0]"),
    ("prod", [("teams[0].cancel_at", 0.7)], "teams[0].cancel_at", "add 0.7 to thresholds"),
    ("prod", [("teams[0].monthly_amount", 0)], "teams[0].monthly_amount", "greater than 0"),
    ("prod", [("labels.vtx-team", "nlp")], "labels.vtx-team", "team:"),
    ("dev", [("ci.github_repository", "not a repo")], "ci.github_repository", "acme/vtx"),
]


def further(
    stack: str, entries: list[dict[str, str]], path: str, expected: str
) -> tuple[str, list[tuple[str, Any]], str, str]:
    """A case that sets ``capacity_regions`` to ``entries``."""
    return stack, [("capacity_regions", entries)], path, expected


EAST4 = {"region": "us-east4", "psc_subnet_cidr": "10.31.0.16/28"}
WEST1 = {"region": "us-west1", "psc_subnet_cidr": "10.31.0.32/28"}
REGION_0, PSC_0 = "capacity_regions[0].region", "capacity_regions[0].psc_subnet_cidr"
CASES += [
    further("prod", [{**EAST4, "region": "us-east9"}], REGION_0, "vtx knows"),
    further("prod", [{**EAST4, "region": "europe-west4"}], REGION_0, "stack's own region"),
    further(
        "prod",
        [EAST4, {**EAST4, "psc_subnet_cidr": "10.31.0.32/28"}],
        "capacity_regions[1].region",
        "listed already, at capacity_regions[0]",
    ),
    further("prod", [{"region": "us-east4"}], PSC_0, "required in network mode psc-interface"),
    further("prod", [{"region": "us-east4"}], PSC_0, "psc_subnet_cidr: 10.31.0.16/28"),
    further("dev", [EAST4], PSC_0, "only used in network mode psc-interface"),
    further("prod", [{**EAST4, "psc_subnet_cidr": "10.31.0.16/29"}], PSC_0, "/28 or larger"),
    further(
        "prod",
        [{**EAST4, "psc_subnet_cidr": "10.31.0.0/28"}],
        PSC_0,
        "overlaps network.psc_subnet_cidr",
    ),
    further(
        "prod",
        [{**EAST4, "psc_subnet_cidr": "10.30.4.0/28"}],
        PSC_0,
        "overlaps network.subnet_cidr",
    ),
    further(
        "prod",
        [EAST4, {**WEST1, "psc_subnet_cidr": "10.31.0.16/28"}],
        "capacity_regions[1].psc_subnet_cidr",
        "overlaps capacity_regions[0].psc_subnet_cidr",
    ),
    further("prod", [{**EAST4, "psc_subnet_cidr": "172.16.9.0/28"}], PSC_0, "reserves"),
    further("prod", [{**EAST4, "zone": "a"}], "capacity_regions[0].zone", "psc_subnet_cidr"),
]


@pytest.mark.parametrize(
    ("stack", "changes", "path", "expected"),
    CASES,
    ids=[f"{c[0]}:{c[2]}:{c[3]}" for c in CASES],
)
def test_config_mistake_names_key_path_and_fix(
    stack: str, changes: list[tuple[str, Any]], path: str, expected: str
) -> None:
    problems = problems_of(mutated(stack, *changes))
    matching = [p for p in problems if p.path == f"vtx:platform.{path}"]
    assert matching, f"no problem at vtx:platform.{path}: {[str(p) for p in problems]}"
    assert any(expected in str(p) for p in matching), [str(p) for p in matching]
    assert all(p.source == "Pulumi.test.yaml" for p in problems)


def test_every_problem_is_reported_at_once() -> None:
    values = mutated(
        "prod",
        ("network.subnet_cidr", "172.16.4.0/24"),
        ("quotas[0].count", -5),
        ("quotas[1].accelerator", "TPU_V9"),
    )
    paths = {p.path for p in problems_of(values)}
    assert {
        "vtx:platform.network.subnet_cidr",
        "vtx:platform.quotas[0].count",
        "vtx:platform.quotas[1].accelerator",
    } <= paths


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [("gcp:project", "Acme", "GCP project id"), ("gcp:region", "mars", "GCP region")],
)
def test_provider_settings_are_checked_under_their_config_keys(
    key: str, value: str, expected: str
) -> None:
    values = copy.deepcopy(stack_values("dev")) | {key: value}
    (problem,) = problems_of(values)
    assert problem.path == key and expected in problem.message


@pytest.mark.parametrize(
    ("key", "hint"), [("gcp:project", "gcp:project: "), ("gcp:region", "gcp:region: ")]
)
def test_missing_provider_setting_says_what_to_add(key: str, hint: str) -> None:
    values = {k: v for k, v in stack_values("dev").items() if k != key}
    (problem,) = problems_of(values)
    assert problem.path == key and problem.hint is not None and hint in problem.hint


def test_missing_platform_object_says_which_key() -> None:
    values = {k: v for k, v in stack_values("dev").items() if k != "vtx:platform"}
    (problem,) = problems_of(values)
    assert problem.path == "vtx:platform"


def _dev_config(**quota: Any) -> tuple[StackConfig, QuotaRequest]:
    config = load_stack_config(stack_values("dev"), "Pulumi.dev.yaml")
    return config, QuotaRequest.model_validate(
        {"accelerator": "NVIDIA_H100_80GB", "count": 8} | quota
    )


def test_spot_quota_uses_the_preemptible_metric_and_id() -> None:
    config, request = _dev_config(spot=True)
    target = quota_target(request, config.region)
    assert target.metric.endswith("custom_model_training_preemptible_nvidia_h100_gpus")
    assert target.quota_id.startswith("CustomModelTrainingPreemptible")
    assert target.region == "europe-west4" and target.preferred_value == 8


def test_explicit_quota_id_overrides_the_catalog() -> None:
    config, request = _dev_config(quota_id="VerifiedH100QuotaId", region="us-central1")
    target = quota_target(request, config.region)
    assert target.quota_id == "VerifiedH100QuotaId"
    assert target.metric.endswith("custom_model_training_nvidia_h100_gpus")
    assert target.region == "us-central1"


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, info in model.model_fields.items():
        if get_origin(info.annotation) is list:
            (item,) = get_args(info.annotation)
            of_models = isinstance(item, type) and issubclass(item, BaseModel)
            paths.append(f"{prefix}{name}[]" if of_models else f"{prefix}{name}")
            continue
        nested = [
            arg
            for arg in (info.annotation, *get_args(info.annotation))
            if isinstance(arg, type) and issubclass(arg, BaseModel)
        ]
        if nested:
            paths += _field_paths(nested[0], f"{prefix}{name}.")
        else:
            paths.append(f"{prefix}{name}")
    return paths


def test_readme_reference_lists_every_platform_key() -> None:
    readme = (PROJECT_DIR / "infra" / "README.md").read_text()
    reference = readme.split("## `vtx:platform` reference", 1)[1]
    missing = [p for p in _field_paths(PlatformConfig) if f"`{p}`" not in reference]
    # List items (quotas[]) are documented in one row, field by field.
    missing += [f"quotas[].{f}" for f in QuotaRequest.model_fields if f"`{f}`" not in reference]
    missing += [
        f"capacity_regions[].{f}"
        for f in CapacityRegion.model_fields
        if f"`{f}`" not in reference.split("`capacity_regions[]`", 1)[-1]
    ]
    missing += [
        f"teams[].{f}"
        for f in TeamBudget.model_fields
        if f"`{f}`" not in reference.split("`teams[]`", 1)[-1]
    ]
    assert not missing, f"infra/README.md reference lacks: {missing}"


# ---- hostile stack files: ConfigError with the key path, never another exception ---------

STACK_TEXT = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
HOSTILE_STACK_FILES = {
    # name: (file bytes, problem path, fragment of the message)
    "binary": (bytes(range(256)) * 4, "line 2, column 118", "not UTF-8 text: byte 0x80"),
    "NUL bytes": (bytes(1024), "line 1, column 1", "#x0000 is not allowed"),
    "non-UTF-8": (STACK_TEXT.encode() + b"# caf\xe9\n", "line ", "not UTF-8 text: byte 0xe9"),
    "gzip": (b"\x1f\x8b\x08\x00" + bytes(64), "line 1, column 2", "not UTF-8 text: byte 0x8b"),
    "deep nesting": (
        STACK_TEXT.replace("team: ml-platform", "team: " + "[" * 5000 + "]" * 5000).encode(),
        "vtx:platform.labels.team[0]",  # PyYAML 6.0.3 goes on [0][0]...; 6.0.4 stops at [0]
        "nested more than 32 levels deep",
    ),
    "20 MB": (STACK_TEXT.encode() + b"#" + b"x" * 20_000_000, "(file)", "bytes"),
    "key written twice": (
        STACK_TEXT.replace("    cmek: false\n", "    cmek: false\n    cmek: true\n").encode(),
        "vtx:platform.cmek",
        "written twice",
    ),
    "integer beyond 64 bits": (
        STACK_TEXT.replace("count: 8", "count: 99999999999999999999999").encode(),
        "vtx:platform.quotas[0].count",
        "beyond what a 64-bit integer holds",
    ),
}


@pytest.mark.parametrize(
    ("content", "path", "message"), HOSTILE_STACK_FILES.values(), ids=list(HOSTILE_STACK_FILES)
)
def test_hostile_stack_files_raise_config_error_with_the_place(
    tmp_path: Path, content: bytes, path: str, message: str
) -> None:
    file = tmp_path / "Pulumi.hostile.yaml"
    file.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        read_stack_file(file)
    (problem,) = info.value.problems
    assert problem.path.startswith(path) and message in problem.message, problem
    assert problem.source == str(file)


@pytest.mark.parametrize(
    ("key", "value", "path", "expected"),
    [
        ("gcp:region", "mars-north1", "gcp:region", "europe-west4"),
        ("gcp:region", "europe-west9", "gcp:region", "jobs/core/catalog/regions.yaml"),
        (
            "vtx:platform",
            {"quotas": [{"region": "mars-north1"}]},
            "quotas[0].region",
            "europe-west4",
        ),
        ("vtx:platform", {"secret_locations": ["mars-north1"]}, "secret_locations[0]", "region"),
        ("vtx:platform", {"storage": {"location": "mars-north1"}}, "storage.location", "EU"),
        ("vtx:platform", {"environment": "prdo"}, "environment", "did you mean prod?"),
        ("vtx:platform", {"environment": "qa"}, "environment", "dev, staging, prod, production"),
    ],
    ids=["region", "region not in the catalog", "quota", "secret", "bucket", "prdo", "qa"],
)
def test_unknown_regions_and_environments_are_refused_with_what_to_write(
    key: str, value: Any, path: str, expected: str
) -> None:
    values = copy.deepcopy(stack_values("dev"))
    if key == "vtx:platform":
        for name, item in value.items():
            if name == "quotas":
                item = [values[key]["quotas"][0] | item[0]]
            values[key][name] = item
        path = f"vtx:platform.{path}"
    else:
        values[key] = value
    problems = [p for p in problems_of(values) if p.path == path]
    assert problems, [str(p) for p in problems_of(values)]
    assert any(expected in str(p) for p in problems), [str(p) for p in problems]


@pytest.mark.parametrize("environment", ["dev", "staging", "prod", "production"])
def test_every_documented_environment_is_accepted(environment: str) -> None:
    stack = "prod" if is_production(environment) else "dev"
    values = mutated(stack, ("environment", environment))
    assert load_stack_config(values, "Pulumi.test.yaml").platform.environment == environment


def test_an_error_quotes_a_huge_value_in_one_short_line() -> None:
    problems = problems_of(mutated("dev", ("prefix", list(range(100_000)))))
    (problem,) = [p for p in problems if p.path == "vtx:platform.prefix"]
    assert len(str(problem)) < 300, str(problem)[:400]


def test_a_platform_sets_guard_defaults_and_a_bad_one_names_its_key() -> None:
    config = load_stack_config(
        mutated("dev", ("guard", {"no_progress": "30m", "action": "restart"})), "Pulumi.test.yaml"
    )
    assert config.platform.guard is not None and config.platform.guard.action == "restart"
    (found,) = problems_of(mutated("dev", ("guard", {"no_progress": "later"})))
    assert found.path == "vtx:platform.guard.no_progress" and "20m" in (found.hint or "")
