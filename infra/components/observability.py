"""Observability: a Vertex TensorBoard for the jobs' logs, and a budget with threshold alerts."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config import BudgetConfig


@dataclass(frozen=True)
class ObservabilityArgs:
    project: str
    project_number: pulumi.Input[str]
    region: str
    prefix: str
    labels: dict[str, str]
    tensorboard: bool
    budget: BudgetConfig | None
    kms_key: pulumi.Input[str] | None
    tensorboard_depends_on: list[pulumi.Resource]
    budget_depends_on: list[pulumi.Resource]


class Observability(pulumi.ComponentResource):
    tensorboard: gcp.vertex.AiTensorboard | None = None
    budget: gcp.billing.Budget | None = None

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("vtx:platform:Observability", name, None, opts)
        if args.tensorboard:
            self.tensorboard = gcp.vertex.AiTensorboard(
                f"{name}-tensorboard",
                project=args.project,
                region=args.region,
                display_name=f"{args.prefix}-tensorboard",
                description="vtx training runs (AIP_TENSORBOARD_LOG_DIR uploads)",
                labels=args.labels,
                encryption_spec=(
                    gcp.vertex.AiTensorboardEncryptionSpecArgs(kms_key_name=args.kms_key)
                    if args.kms_key is not None
                    else None
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.tensorboard_depends_on),
            )
        if args.budget is not None:
            self.budget = self._budget(name, args, args.budget)
        self.register_outputs({})

    def _budget(
        self, name: str, args: ObservabilityArgs, budget: BudgetConfig
    ) -> gcp.billing.Budget:
        rules = [
            gcp.billing.BudgetThresholdRuleArgs(threshold_percent=t, spend_basis="CURRENT_SPEND")
            for t in budget.thresholds
        ]
        if budget.forecast_threshold is not None:
            rules.append(
                gcp.billing.BudgetThresholdRuleArgs(
                    threshold_percent=budget.forecast_threshold, spend_basis="FORECASTED_SPEND"
                )
            )
        return gcp.billing.Budget(
            f"{name}-budget",
            billing_account=budget.billing_account,
            display_name=f"{args.prefix} monthly",
            budget_filter=gcp.billing.BudgetBudgetFilterArgs(
                projects=[pulumi.Output.concat("projects/", args.project_number)],
                calendar_period="MONTH",
                credit_types_treatment="INCLUDE_ALL_CREDITS",
            ),
            amount=gcp.billing.BudgetAmountArgs(
                specified_amount=gcp.billing.BudgetAmountSpecifiedAmountArgs(
                    currency_code=budget.currency, units=str(budget.monthly_amount)
                )
            ),
            threshold_rules=rules,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.budget_depends_on),
        )
