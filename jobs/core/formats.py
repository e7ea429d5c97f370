"""How the platform writes money, durations and timestamps for people and for Vertex's wire
format, once (durations as templates write them are parsed in ``jobs.core.durations``)."""

from __future__ import annotations

from datetime import UTC, datetime

UNKNOWN = "unknown"
"""What a figure that cannot be known is shown as (never ``$0``)."""


def money(usd: float | None) -> str:
    """US dollars to the cent with thousands separators (``$1,234.50``); ``unknown`` if None."""
    return UNKNOWN if usd is None else f"${usd:,.2f}"


def fine_money(usd: float | None) -> str:
    """US dollars to the micro-dollar, for budgets and what crossed them (``$12.50``,
    ``$0.000125``: a budget under a cent is not ``$0.00``); ``unknown`` if None."""
    if usd is None:
        return UNKNOWN
    return money(usd) if round(usd, 2) == round(usd, 6) else f"${usd:,.6f}".rstrip("0")


def usd_per_h(usd: float | None) -> str:
    """A price per hour (``$3.67/h``); ``unknown`` if None."""
    return UNKNOWN if usd is None else f"{money(usd)}/h"


def share(part: float | None) -> str:
    """A fraction as a percentage to one decimal (``23.3%``); ``unknown`` if None."""
    return UNKNOWN if part is None else f"{100 * part:.1f}%"


def duration(seconds: float | None) -> str:
    """``2d 03h``, ``1h 05m``, ``3m 20s``, ``12s``: the two largest units, whole; ``-`` when
    unknown. For reading only: a value a user is to write in a template is
    ``jobs.core.durations.exact_duration``'s, exact in the template's grammar."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    days, hours, minutes, secs = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def now_rfc3339() -> str:
    """Now in UTC as Vertex writes times (RFC 3339, microseconds, ``Z``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
