"""Durations as people write them in templates (``24h``, ``90m``, ``7d``, ``3600s``, ``3600``)
and as the REST API writes them (protobuf JSON: ``"3600s"``, ``"1.5s"``)."""

from __future__ import annotations

import re

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_duration_s(value: object) -> float | None:
    """Seconds, or None when ``value`` is not a duration (bools are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value)
    if match is None:
        return None
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


def format_duration_s(seconds: float) -> str:
    """Protobuf JSON form of a Duration: whole seconds when possible (``"86400s"``)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds:.3f}s"


def exact_duration(seconds: float) -> str:
    """``seconds`` as a template writes it, exactly, in the largest unit that divides it
    (``7d``, ``90m``, ``3601s``): what a hint tells a user to write reads back through
    ``parse_duration_s`` to the same seconds. Elapsed times shown to be read, rounded to two
    units (``1h 05m``), are ``jobs.core.formats.duration``'s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    # Whole seconds as an integer: ``:g`` writes 1000001 as "1e+06", which is neither exact
    # nor the template's grammar.
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds:g}s"
