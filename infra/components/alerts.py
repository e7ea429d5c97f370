"""Alerts as code: Cloud Monitoring alert policies on the controller's own structured lines.

A log-based alert on the trainer's lines cannot tell a hang from a normal end; the controller
can, and says so: each pass of ``<prefix>-controller`` writes one line (``vtx_event:
controller_pass``) and one more per progress-guard breach it acted on (``vtx_event:
guard_breach`` with ``run_id``, ``action``, ``job``, ``reason`` and ``team``;
jobs/control/cloud_function.py). Two log-based metrics count them, and two policies watch
the counts:

- ``<prefix>: progress guard breached``: the breach count above 0 in a minute, one incident
  per run (the metric's labels), notifying ``alerts.notification_channels``/``emails``; and
  per team of ``alerts.teams``, the same over the team's runs alone, notifying the team's;
- ``<prefix>: controller stopped``: no pass line for ``alerts.silent_minutes`` (the monitor's
  monitor: with it silent, no breach is acted on or alerted on either).

E-mail addresses become e-mail notification channels, one per address however many policies
notify it. The facts relied on (structured lines on Cloud Run, log-based metric labels, absence
conditions) are in docs/vertex-facts.md, "Alerts".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from infra.config import AlertsConfig, AlertTargets

EVENT_FIELD = "vtx_event"
PASS_EVENT = "controller_pass"
BREACH_EVENT = "guard_breach"
"""What the controller writes (``jobs.control.cloud_function``'s names: infra reads no code of
the controller's, tests/infra/components/test_alerts.py holds the two equal)."""
BREACH_LABELS = {
    "run_id": "The run whose guard was breached (vtx status RUN)",
    "action": "What the guard does: cancel, restart or next_rung",
    "team": "The run's team (its jobs' vtx-team label); empty when it names none",
}
"""The breach metric's labels, each extracted from the line's field of the same name."""
RESOURCE_TYPE = "cloud_run_revision"
"""A 2nd-gen function runs as a Cloud Run service of its name; its lines are logged there."""


def breach_documentation(prefix: str) -> str:
    return (
        f"A progress guard of a run on **{prefix}** was breached, and the controller acted "
        "on it: run `${metric.label.run_id}`, action `${metric.label.action}` (cancel: the "
        "run ends; restart: the same rung again; next_rung: the ladder moves on), team "
        "`${metric.label.team}`.\n\n"
        "See why and what happened next with `vtx status ${metric.label.run_id}` (its "
        "breaches and moves), or the controller's line in Cloud Logging: "
        f'`resource.labels.service_name="{prefix}-controller" '
        f'jsonPayload.{EVENT_FIELD}="{BREACH_EVENT}"`.'
    )


def silent_documentation(prefix: str, minutes: int) -> str:
    return (
        f"The controller of **{prefix}** (function `{prefix}-controller`, called every "
        f"minute by Cloud Scheduler job `{prefix}-controller`) has not finished a pass for "
        f"{minutes} minutes. Until it does, no ladder moves on, no budget or progress guard is "
        "enforced and no breach alert fires.\n\n"
        f"Look at its errors: `gcloud functions logs read {prefix}-controller`, and at its "
        f"schedule: `gcloud scheduler jobs describe {prefix}-controller`."
    )


def line_filter(prefix: str, event: str) -> str:
    """The controller's lines of one kind (Logging query language)."""
    return (
        f'resource.type="{RESOURCE_TYPE}" '
        f'AND resource.labels.service_name="{prefix}-controller" '
        f'AND jsonPayload.{EVENT_FIELD}="{event}"'
    )


def channel_key(email: str) -> str:
    """A logical name's part for an address (Pulumi names are kept to letters, digits, '-')."""
    return re.sub(r"[^a-z0-9]+", "-", email.lower()).strip("-")


@dataclass(frozen=True)
class AlertsArgs:
    project: str
    prefix: str
    labels: dict[str, str]
    config: AlertsConfig
    controller: list[pulumi.Resource] = field(default_factory=list)
    """The controller's function: its lines exist once it does."""
    apis: list[pulumi.Resource] = field(default_factory=list)


class Alerts(pulumi.ComponentResource):
    breaches: gcp.logging.Metric
    passes: gcp.logging.Metric
    breached: gcp.monitoring.AlertPolicy
    team_breached: dict[str, gcp.monitoring.AlertPolicy]
    silent: gcp.monitoring.AlertPolicy

    def __init__(self, name: str, args: AlertsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Alerts", name, None, opts)
        self._name, self._args = name, args
        self._own = pulumi.ResourceOptions(parent=self, depends_on=[*args.apis, *args.controller])
        self.emails = self._email_channels()
        self.breaches = self._breach_metric()
        self.passes = self._pass_metric()
        config = args.config
        self.breached = self._breach_policy("breached", "", config)
        self.team_breached = {
            team: self._breach_policy(f"breached-{team}", team, targets)
            for team, targets in config.teams.items()
        }
        self.silent = self._silent_policy()
        self.register_outputs({})

    def _email_channels(self) -> dict[str, gcp.monitoring.NotificationChannel]:
        config, args = self._args.config, self._args
        emails = [*config.emails, *(e for t in config.teams.values() for e in t.emails)]
        return {
            email: gcp.monitoring.NotificationChannel(
                f"{self._name}-email-{channel_key(email)}",
                project=args.project,
                type="email",
                display_name=f"{args.prefix} alerts: {email}",
                labels={"email_address": email},
                user_labels=args.labels,
                opts=self._own,
            )
            for email in dict.fromkeys(emails)
        }

    def _channels(self, targets: AlertTargets) -> list[pulumi.Input[str]]:
        return [*targets.notification_channels, *(self.emails[e].name for e in targets.emails)]

    def _breach_metric(self) -> gcp.logging.Metric:
        args = self._args
        return gcp.logging.Metric(
            f"{self._name}-breaches",
            project=args.project,
            name=f"{args.prefix}-guard-breaches",
            description="Progress-guard breaches the vtx controller acted on, by run",
            filter=line_filter(args.prefix, BREACH_EVENT),
            metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                metric_kind="DELTA",
                value_type="INT64",
                unit="1",
                labels=[
                    gcp.logging.MetricMetricDescriptorLabelArgs(
                        key=key, value_type="STRING", description=about
                    )
                    for key, about in BREACH_LABELS.items()
                ],
            ),
            label_extractors={key: f"EXTRACT(jsonPayload.{key})" for key in BREACH_LABELS},
            opts=self._own,
        )

    def _pass_metric(self) -> gcp.logging.Metric:
        args = self._args
        return gcp.logging.Metric(
            f"{self._name}-passes",
            project=args.project,
            name=f"{args.prefix}-controller-passes",
            description="Passes the vtx controller finished",
            filter=line_filter(args.prefix, PASS_EVENT),
            metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                metric_kind="DELTA", value_type="INT64", unit="1"
            ),
            opts=self._own,
        )

    def _metric_filter(self, metric: gcp.logging.Metric, extra: str = "") -> pulumi.Output[str]:
        return pulumi.Output.concat(
            'metric.type="logging.googleapis.com/user/',
            metric.name,
            f'" AND resource.type="{RESOURCE_TYPE}"',
            extra,
        )

    def _breach_policy(
        self, suffix: str, team: str, targets: AlertTargets
    ) -> gcp.monitoring.AlertPolicy:
        args = self._args
        whose = f" (team {team})" if team else ""
        extra = f' AND metric.label.team="{team}"' if team else ""
        threshold = gcp.monitoring.AlertPolicyConditionConditionThresholdArgs(
            filter=self._metric_filter(self.breaches, extra),
            comparison="COMPARISON_GT",
            threshold_value=0,
            duration="0s",
            aggregations=[
                # One series per run (and action): each run its own incident, named in it.
                gcp.monitoring.AlertPolicyConditionConditionThresholdAggregationArgs(
                    alignment_period="60s",
                    per_series_aligner="ALIGN_SUM",
                    cross_series_reducer="REDUCE_SUM",
                    group_by_fields=[f"metric.label.{key}" for key in BREACH_LABELS],
                )
            ],
            trigger=gcp.monitoring.AlertPolicyConditionConditionThresholdTriggerArgs(count=1),
        )
        return gcp.monitoring.AlertPolicy(
            f"{self._name}-{suffix}",
            project=args.project,
            display_name=f"{args.prefix}: progress guard breached{whose}",
            combiner="OR",
            severity="WARNING",
            conditions=[
                gcp.monitoring.AlertPolicyConditionArgs(
                    display_name="A run's progress guard was breached",
                    condition_threshold=threshold,
                )
            ],
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                subject=f"{args.prefix}: run ${{metric.label.run_id}} breached its "
                "progress guard (${metric.label.action})",
                content=breach_documentation(args.prefix),
                mime_type="text/markdown",
            ),
            # A breach is an event, not a state: the incident closes itself a while after.
            alert_strategy=gcp.monitoring.AlertPolicyAlertStrategyArgs(auto_close="1800s"),
            notification_channels=self._channels(targets),
            user_labels=args.labels,
            opts=self._own,
        )

    def _silent_policy(self) -> gcp.monitoring.AlertPolicy:
        args = self._args
        minutes = args.config.silent_minutes
        absent = gcp.monitoring.AlertPolicyConditionConditionAbsentArgs(
            filter=self._metric_filter(self.passes),
            duration=f"{minutes * 60}s",
            aggregations=[
                # Summed into one series: a new revision of the function starts a series of
                # its own, and the old one's end must not read as the controller's.
                gcp.monitoring.AlertPolicyConditionConditionAbsentAggregationArgs(
                    alignment_period="60s",
                    per_series_aligner="ALIGN_SUM",
                    cross_series_reducer="REDUCE_SUM",
                )
            ],
            trigger=gcp.monitoring.AlertPolicyConditionConditionAbsentTriggerArgs(count=1),
        )
        return gcp.monitoring.AlertPolicy(
            f"{self._name}-silent",
            project=args.project,
            display_name=f"{args.prefix}: controller stopped",
            combiner="OR",
            severity="ERROR",
            conditions=[
                gcp.monitoring.AlertPolicyConditionArgs(
                    display_name=f"No controller pass for {minutes} minutes",
                    condition_absent=absent,
                )
            ],
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                subject=f"{args.prefix}: the vtx controller stopped passing",
                content=silent_documentation(args.prefix, minutes),
                mime_type="text/markdown",
            ),
            notification_channels=self._channels(args.config),
            user_labels=args.labels,
            opts=self._own,
        )
