"""Templates with scheduling strategies and reservations, for the scheduling tests and the CLI's
cost table."""

from __future__ import annotations

from typing import Any

RESERVATION = "projects/capacity-owner/zones/us-central1-a/reservations/l4-pool"


L4 = {"machine": "g2-standard-8"}


def template(pools: dict[str, Any], **scheduling: Any) -> dict[str, Any]:
    return {
        "name": "sched",
        "image": "trainer",
        "pools": pools,
        "scheduling": {"timeout": "24h", **scheduling},
    }


def with_reservation(pool: dict[str, Any], **reservation: Any) -> dict[str, Any]:
    return {**pool, "reservation": reservation}
