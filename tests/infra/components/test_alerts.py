"""The stack's alerts under mocks: log-based metrics over the controller's own structured lines
(the names the function writes), a breach policy per stack and per team, the controller's
silence, e-mail channels made once per address; none of it without ``alerts``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.components import alerts
from infra.config import ConfigError, load_stack_config, read_stack_file, schedule_minutes
from infra.offline.program import OfflineRun, RecordedResource, run_offline
from jobs.control import cloud_function
from jobs.control.driver import GuardBreach

PROJECT_DIR = Path(__file__).resolve().parents[3]
METRIC = "gcp:logging/metric:Metric"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
ALERT_TYPES = (METRIC, POLICY, CHANNEL)


def named(run: OfflineRun, type_token: str) -> dict[str, RecordedResource]:
    return {r.name: r for r in run.of_type(type_token)}


def test_the_metrics_count_the_lines_the_controller_writes(prod_run: OfflineRun) -> None:
    assert alerts.EVENT_FIELD == cloud_function.EVENT_FIELD
    assert alerts.PASS_EVENT == cloud_function.PASS_EVENT
    assert alerts.BREACH_EVENT == cloud_function.BREACH_EVENT
    metrics = named(prod_run, METRIC)
    breaches, passes = metrics["alerts-breaches"], metrics["alerts-passes"]
    service = 'resource.labels.service_name="acme-vtx-prod-controller"'
    assert service in breaches.inputs["filter"] and service in passes.inputs["filter"]
    assert 'resource.type="cloud_run_revision"' in breaches.inputs["filter"]
    assert breaches.inputs["filter"].endswith('jsonPayload.vtx_event="guard_breach"')
    assert passes.inputs["filter"].endswith('jsonPayload.vtx_event="controller_pass"')
    # Each label is a field of the breach line (jobs.control.driver.GuardBreach).
    assert breaches.inputs["labelExtractors"] == {
        "run_id": "EXTRACT(jsonPayload.run_id)",
        "action": "EXTRACT(jsonPayload.action)",
        "team": "EXTRACT(jsonPayload.team)",
    }
    descriptor = breaches.inputs["metricDescriptor"]
    assert (descriptor["metricKind"], descriptor["valueType"]) == ("DELTA", "INT64")
    assert {label["key"] for label in descriptor["labels"]} == {"run_id", "action", "team"}
    assert set(breaches.inputs["labelExtractors"]) <= set(GuardBreach.__dataclass_fields__)


def channel_of(run: OfflineRun, email: str) -> str:
    (found,) = [c for c in run.of_type(CHANNEL) if c.inputs["labels"] == {"email_address": email}]
    assert found.inputs["type"] == "email"
    return found.outputs["name"]


def test_a_breach_fires_per_run_with_what_to_run_and_notifies_the_stacks_and_the_teams(
    prod_run: OfflineRun,
) -> None:
    policies = named(prod_run, POLICY)
    stack, nlp = policies["alerts-breached"], policies["alerts-breached-nlp"]
    metric = "logging.googleapis.com/user/acme-vtx-prod-guard-breaches"
    (condition,) = stack.inputs["conditions"]
    threshold = condition["conditionThreshold"]
    assert f'metric.type="{metric}"' in threshold["filter"]
    assert "metric.label.team" not in threshold["filter"]
    assert (threshold["comparison"], threshold["thresholdValue"]) == ("COMPARISON_GT", 0)
    (aggregation,) = threshold["aggregations"]
    assert "metric.label.run_id" in aggregation["groupByFields"]  # an incident per run
    assert "vtx status ${metric.label.run_id}" in stack.inputs["documentation"]["content"]
    oncall = channel_of(prod_run, "ml-platform-oncall@acme.example")
    team = channel_of(prod_run, "nlp-oncall@acme.example")
    assert stack.inputs["notificationChannels"] == [oncall]
    assert nlp.inputs["notificationChannels"] == [team]
    (team_condition,) = nlp.inputs["conditions"]
    assert team_condition["conditionThreshold"]["filter"].endswith('AND metric.label.team="nlp"')


def test_the_controller_stopping_passing_alerts_after_the_configured_minutes(
    prod_run: OfflineRun,
) -> None:
    silent = named(prod_run, POLICY)["alerts-silent"]
    (condition,) = silent.inputs["conditions"]
    absent = condition["conditionAbsent"]
    assert absent["duration"] == "600s"
    assert (
        'metric.type="logging.googleapis.com/user/acme-vtx-prod-controller-passes"'
        in (absent["filter"])
    )
    (aggregation,) = absent["aggregations"]
    assert aggregation["crossSeriesReducer"] == "REDUCE_SUM" and not aggregation.get(
        "groupByFields"
    )  # one series, whatever revision served the pass
    assert silent.inputs["notificationChannels"] == [
        channel_of(prod_run, "ml-platform-oncall@acme.example")
    ]
    assert (
        "gcloud functions logs read acme-vtx-prod-controller"
        in (silent.inputs["documentation"]["content"])
    )


def test_no_alerts_without_the_key(dev_run: OfflineRun) -> None:
    assert (
        load_stack_config(
            read_stack_file(PROJECT_DIR / "Pulumi.dev.yaml"), "Pulumi.dev.yaml"
        ).platform.alerts
        is None
    )
    assert not [r for r in dev_run.resources if r.type in ALERT_TYPES]


def test_existing_channels_are_named_and_an_address_gets_one_channel(tmp_path: Path) -> None:
    values = read_stack_file(PROJECT_DIR / "Pulumi.prod.yaml")
    config: dict[str, Any] = copy.deepcopy(values)
    existing = "projects/acme-vtx-prod/notificationChannels/42"
    config["vtx:platform"]["alerts"] = {
        "notification_channels": [existing],
        "emails": ["a@acme.example"],
        "teams": {"vision": {"emails": ["a@acme.example"]}},
    }
    stack = tmp_path / "Pulumi.alerts.yaml"
    stack.write_text(yaml.safe_dump({"config": config}))
    run = run_offline("alerts", config_file=stack)
    (channel,) = run.of_type(CHANNEL)
    policies = named(run, POLICY)
    name = channel.outputs["name"]
    assert policies["alerts-breached"].inputs["notificationChannels"] == [existing, name]
    assert policies["alerts-breached-vision"].inputs["notificationChannels"] == [name]
    assert "alerts-breached-nlp" not in policies


@pytest.mark.parametrize(
    ("alerts_config", "controller", "where", "said"),
    [
        ({"silent_minutes": 10}, {}, "vtx:platform.alerts", "names no one to notify"),
        (
            {"emails": ["a@acme.example"]},
            {"enabled": False},
            "vtx:platform.alerts",
            "controller.enabled is false",
        ),
        (
            {"emails": ["a@acme.example"], "teams": {"speech": {"emails": ["s@acme.example"]}}},
            {},
            "vtx:platform.alerts.teams.speech",
            "is not a team of this stack",
        ),
        (
            {"emails": ["a@acme.example"], "teams": {"nlp": {}}},
            {},
            "vtx:platform.alerts.teams.nlp",
            "names no one to notify",
        ),
        (
            {"notification_channels": ["slack-oncall"]},
            {},
            "vtx:platform.alerts.notification_channels[0]",
            "not a valid Cloud Monitoring notification channel name",
        ),
        (
            {"emails": ["a@acme.example"], "silent_minutes": 15},
            {"schedule": "*/15 * * * *"},
            "vtx:platform.alerts.silent_minutes",
            "not above the controller's schedule (a pass every 15 minutes)",
        ),
        (
            {"emails": ["a@acme.example"], "silent_minutes": 1},
            {},
            "vtx:platform.alerts.silent_minutes",
            "greater than or equal to 2",
        ),
    ],
)
def test_alert_config_mistakes_say_where_and_what_to_write(
    alerts_config: dict[str, Any], controller: dict[str, Any], where: str, said: str
) -> None:
    values = copy.deepcopy(read_stack_file(PROJECT_DIR / "Pulumi.prod.yaml"))
    values["vtx:platform"]["alerts"] = alerts_config
    values["vtx:platform"]["controller"] = controller
    with pytest.raises(ConfigError) as info:
        load_stack_config(values, "Pulumi.prod.yaml")
    matching = [p for p in info.value.problems if p.path == where]
    assert matching, [str(p) for p in info.value.problems]
    assert any(said in p.message for p in matching), [str(p) for p in matching]
    # Ours say what to write instead; a bound (pydantic's) says the bound.
    assert all(p.hint for p in matching) or where.endswith("silent_minutes")


@pytest.mark.parametrize(
    ("schedule", "minutes"),
    [("* * * * *", 1), ("*/5 * * * *", 5), ("0 * * * *", None), ("*/5 9-17 * * *", None)],
)
def test_the_gap_between_passes_is_read_only_from_every_n_minutes(
    schedule: str, minutes: int | None
) -> None:
    assert schedule_minutes(schedule) == minutes
