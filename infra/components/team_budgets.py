"""Team budgets: per team, a billing budget over the resources labelled with the team, and past
its ``cancel_at`` a function that cancels the team's running and queued Vertex jobs.

The chain, per team with a ``cancel_at``: ``billing.Budget`` (the project AND the ``vtx-team``
label) -> all updates to ``pubsub.Topic`` ``<prefix>-budget-<team>`` (schema 1.0) -> Eventarc
trigger -> ``cloudfunctionsv2.Function`` ``<prefix>-cancel-<team>`` (infra/functions/budget_cancel,
with the cancel act it shares with the controller, jobs/control/cancels.py) running as
``<prefix>-canceler``, whose custom role holds only the list and cancel permissions below. A
team without ``cancel_at`` gets the budget and its e-mail alerts only.

Shared by every team: the three service accounts (the function's runtime, the trigger's identity,
the build's) and the custom role: IAM cannot tell one team's jobs from another's (labels are not
an IAM condition on Vertex jobs), so a per-team account would hold exactly the same rights.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.components.access.identity import (
    function_account,
    function_builder_grants,
    project_role,
    sa_member,
)
from infra.config import CANCEL_PERMISSIONS, CANCELER_ROLE_SUFFIX, TeamBudget
from jobs.core.stack import LABEL_TEAM

REPOSITORY = Path(__file__).resolve().parents[2]
FUNCTION_SOURCE = REPOSITORY / "infra" / "functions" / "budget_cancel"
SOURCE_FILES = ("main.py", "cancel_jobs.py", "requirements.txt")
CARRIED = "jobs.control.cancels"
"""The one module of ours the function imports: the cancel act the controller uses too
(standard library only), zipped in at its own path with its packages' ``__init__.py``."""
ENTRY_POINT = "on_budget_update"
RUNTIME = "python312"
# Cloud Billing publishes budget notifications as this Google account; the Budget API grants it
# publisher on a topic it is given (which is why the caller needs pubsub.topics.setIamPolicy).
# Declared here too, so that the grant is reviewed and survives a policy reset (infra/README.md,
# "Team budgets").
BUDGET_PUBLISHER = "serviceAccount:billing-budget-alert@system.gserviceaccount.com"
PUBSUB_EVENT = "google.cloud.pubsub.topic.v1.messagePublished"


def source_files() -> dict[str, Path]:
    """The function's whole source, by path in the archive: its folder, and CARRIED."""
    files = {name: FUNCTION_SOURCE / name for name in SOURCE_FILES}
    parts = CARRIED.split(".")
    for depth in range(1, len(parts)):
        package = "/".join(parts[:depth])
        files[f"{package}/__init__.py"] = REPOSITORY / package / "__init__.py"
    module = "/".join(parts) + ".py"
    return files | {module: REPOSITORY / module}


def source_digest() -> str:
    """The function source's content hash: a change uploads a new object, which rebuilds."""
    digest = hashlib.sha256()
    for name, path in source_files().items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class TeamBudgetsArgs:
    project: str
    project_number: pulumi.Input[str]
    region: str
    job_regions: list[str]
    """Where the stack runs jobs (gcp:region, then capacity_regions): the function looks in each."""
    prefix: str
    labels: dict[str, str]
    billing_account: str
    currency: str
    teams: list[TeamBudget]
    source_bucket: pulumi.Input[str]
    """The staging bucket: the function's zipped source is uploaded there."""
    kms_key: pulumi.Input[str] | None
    apis: list[pulumi.Resource] = field(default_factory=list)
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The key's grant to Pub/Sub's agent with CMEK (a topic cannot be created before it)."""


class TeamBudgets(pulumi.ComponentResource):
    budgets: dict[str, gcp.billing.Budget]
    topics: dict[str, gcp.pubsub.Topic]
    functions: dict[str, gcp.cloudfunctionsv2.Function]

    def __init__(
        self, name: str, args: TeamBudgetsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("vtx:platform:TeamBudgets", name, None, opts)
        self._name, self._args = name, args
        self._own = pulumi.ResourceOptions(parent=self, depends_on=args.apis)
        self.budgets, self.topics, self.functions = {}, {}, {}
        cancelling = [team for team in args.teams if team.cancel_at is not None]
        if cancelling:
            self._identities()
            self._source = self._upload_source()
        for team in args.teams:
            topic = self._topic(team) if team.cancel_at is not None else None
            self.budgets[team.name] = self._budget(team, topic)
            if topic is not None:
                self.functions[team.name] = self._function(team, topic)
        self.register_outputs({"teams": [team.name for team in args.teams]})

    def _account(self, suffix: str, what: str) -> gcp.serviceaccount.Account:
        # Service account ids are at most 30 characters: the prefix takes 21, suffixes 9.
        args = self._args
        return function_account(
            f"{self._name}-{suffix}",
            args.project,
            f"{args.prefix}-{suffix}",
            f"vtx team budgets: {what}",
            self._own,
        )

    def _identities(self) -> None:
        """The runtime account with the cancel role, the trigger's, and the build's (not the
        Compute Engine default account, which is Editor on new projects)."""
        args, own = self._args, self._own
        self.runtime = self._account("canceler", "the cancel function runs as it")
        self.trigger = self._account("invoker", "Eventarc invokes the cancel function as it")
        self.builder = self._account("fnbuild", "Cloud Build builds the cancel function as it")
        self.role = project_role(
            f"{self._name}-canceler-role",
            args.project,
            f"{args.prefix.replace('-', '_')}{CANCELER_ROLE_SUFFIX}",
            "vtx team budget canceler",
            "List and cancel Vertex CustomJobs and HyperparameterTuningJobs",
            CANCEL_PERMISSIONS,
            own,
        )
        self.grants = [
            gcp.projects.IAMMember(
                f"{self._name}-canceler-cancels",
                project=args.project,
                role=self.role.name,
                member=sa_member(self.runtime.email),
                opts=own,
            ),
            *function_builder_grants(
                f"{self._name}-fnbuild",
                args.project,
                args.region,
                self.builder.email,
                args.source_bucket,
                own,
            ),
        ]

    def _upload_source(self) -> gcp.storage.BucketObject:
        archive = pulumi.AssetArchive(
            {name: pulumi.FileAsset(str(path)) for name, path in source_files().items()}
        )
        return gcp.storage.BucketObject(
            f"{self._name}-source",
            bucket=self._args.source_bucket,
            name=f"functions/budget-cancel-{source_digest()}.zip",
            source=archive,
            opts=self._own,
        )

    def _team_labels(self, team: TeamBudget) -> dict[str, str]:
        return {**self._args.labels, LABEL_TEAM: team.name}

    def _topic(self, team: TeamBudget) -> gcp.pubsub.Topic:
        args = self._args
        topic = gcp.pubsub.Topic(
            f"{self._name}-{team.name}-topic",
            project=args.project,
            name=f"{args.prefix}-budget-{team.name}",
            kms_key_name=args.kms_key,
            labels=self._team_labels(team),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.apis, *args.depends_on]),
        )
        self.topics[team.name] = topic
        gcp.pubsub.TopicIAMMember(
            f"{self._name}-{team.name}-budget-publisher",
            project=args.project,
            topic=topic.name,
            role="roles/pubsub.publisher",
            member=BUDGET_PUBLISHER,
            opts=self._own,
        )
        return topic

    def _budget(self, team: TeamBudget, topic: gcp.pubsub.Topic | None) -> gcp.billing.Budget:
        args = self._args
        amount = gcp.billing.BudgetAmountSpecifiedAmountArgs(
            currency_code=args.currency, units=str(team.monthly_amount)
        )
        return gcp.billing.Budget(
            f"{self._name}-{team.name}-budget",
            billing_account=args.billing_account,
            display_name=f"{args.prefix} team {team.name}",
            budget_filter=gcp.billing.BudgetBudgetFilterArgs(
                projects=[pulumi.Output.concat("projects/", args.project_number)],
                # One label and one value is all a budget filter takes: the team's.
                labels={LABEL_TEAM: team.name},
                calendar_period="MONTH",
                credit_types_treatment="INCLUDE_ALL_CREDITS",
            ),
            amount=gcp.billing.BudgetAmountArgs(specified_amount=amount),
            threshold_rules=[
                gcp.billing.BudgetThresholdRuleArgs(
                    threshold_percent=t, spend_basis="CURRENT_SPEND"
                )
                for t in team.thresholds
            ],
            all_updates_rule=(
                gcp.billing.BudgetAllUpdatesRuleArgs(pubsub_topic=topic.id, schema_version="1.0")
                if topic is not None
                else None
            ),
            opts=self._own,
        )

    def _function(self, team: TeamBudget, topic: gcp.pubsub.Topic) -> gcp.cloudfunctionsv2.Function:
        args = self._args
        assert team.cancel_at is not None
        function = gcp.cloudfunctionsv2.Function(
            f"{self._name}-{team.name}-cancel",
            project=args.project,
            location=args.region,
            name=f"{args.prefix}-cancel-{team.name}",
            description=f"Cancels team {team.name}'s Vertex jobs past its budget",
            labels=self._team_labels(team),
            build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
                runtime=RUNTIME,
                entry_point=ENTRY_POINT,
                service_account=self.builder.name,
                source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                    storage_source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
                        bucket=self._source.bucket, object=self._source.name
                    )
                ),
            ),
            service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
                service_account_email=self.runtime.email,
                # One at a time: two deliveries at once would list and cancel the same jobs.
                max_instance_count=1,
                available_memory="256M",
                timeout_seconds=540,
                ingress_settings="ALLOW_INTERNAL_ONLY",
                all_traffic_on_latest_revision=True,
                environment_variables={
                    "VTX_PROJECT": args.project,
                    "VTX_REGIONS": ",".join(args.job_regions),
                    "VTX_TEAM": team.name,
                    "VTX_TEAM_LABEL": LABEL_TEAM,
                    "VTX_CANCEL_AT": f"{team.cancel_at:g}",
                },
            ),
            event_trigger=gcp.cloudfunctionsv2.FunctionEventTriggerArgs(
                trigger_region=args.region,
                event_type=PUBSUB_EVENT,
                pubsub_topic=topic.id,
                # A cancel that failed (Vertex unreachable) is tried again on redelivery.
                retry_policy="RETRY_POLICY_RETRY",
                service_account_email=self.trigger.email,
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.apis, *self.grants, self._source]
            ),
        )
        # Eventarc pushes each message to the function's Cloud Run service as the trigger's
        # account, which must be allowed to invoke that service (and nothing else).
        gcp.cloudrunv2.ServiceIamMember(
            f"{self._name}-{team.name}-invoker",
            project=args.project,
            location=args.region,
            name=function.name,
            role="roles/run.invoker",
            member=sa_member(self.trigger.email),
            opts=self._own,
        )
        return function
