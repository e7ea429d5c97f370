"""Scheduling strategies as the cost table prints them."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from jobs.custom_jobs.facts import template_facts
from jobs.pricing.estimates import estimate
from jobs.spec.template import JobTemplate
from tests.jobs.core.price_tables import US_CENTRAL1_TABLE, with_table
from tests.jobs.custom_jobs.scheduling_templates import L4, RESERVATION, template, with_reservation
from vtx.views.costs import print_cost


def _printed(result: Any) -> str:
    out = io.StringIO()
    print_cost(Console(file=out, width=400, color_system=None), result, "plan")
    return out.getvalue()


def test_a_reservation_is_priced_unknown_never_silently_on_demand() -> None:
    doc = template({"chief": with_reservation(L4, affinity="specific", values=[RESERVATION])})
    job = template_facts(JobTemplate.from_document(doc))
    result = estimate(job, "us-central1", catalog=with_table(US_CENTRAL1_TABLE))
    assert result.price_kind == "reservation" and result.usd_per_h is None
    assert result.usd_at_timeout is None and result.on_demand_usd_per_h is not None
    text = _printed(result)
    assert "This job (reservation price in us-central1): unknown" in text
    assert "chief (SPECIFIC_RESERVATION) run on a Compute Engine reservation" in text
    assert f"On-demand in the same region: ${result.on_demand_usd_per_h:,.2f}/h." in text
    assert "ANY_RESERVATION runs at on-demand prices" not in text
    assert "* the price this job pays" not in text


def test_any_reservation_says_it_may_fall_back_to_on_demand() -> None:
    doc = template({"chief": with_reservation(L4, affinity="any")})
    text = _printed(estimate(template_facts(JobTemplate.from_document(doc)), "us-central1"))
    assert "ANY_RESERVATION runs at on-demand prices when no reservation matches" in text


def test_flex_start_is_its_own_price_kind_on_the_preemptible_quota() -> None:
    result = estimate(
        template_facts(JobTemplate.from_document(template({"chief": L4}, strategy="flex_start"))),
        "us-central1",
    )
    assert result.price_kind == "FLEX_START" and result.usd_per_h is None
    assert "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4_gpus" in (
        result.quota
    )
    assert "FLEX_START (Dynamic Workload Scheduler) is billed at its own prices" in (
        _printed(result)
    )
