"""``orderBy`` of the List calls that take one, as their request messages document it.

ListModelsRequest.order_by and ListEndpointsRequest.order_by: "A comma-separated list of fields
to order by, sorted in ascending order. Use "desc" after a field name for descending. Supported
fields: display_name, create_time, update_time. Example: display_name, create_time desc".
ListModelVersionsRequest.order_by: the same with create_time and update_time only (its example:
``update_time asc, create_time desc``, so ``asc`` is written out too). A field outside the list is
a 400 INVALID_ARGUMENT. camelCase names (``displayName``) are read like the snake_case ones, as
the same requests' ``filter`` reads both (UNCONFIRMED for orderBy: docs/vertex-facts.md).

Ties keep the order the list already had (its default order), so every order is total.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobs.local.api.rest_forms import BadRequest, page_after, page_of

MODEL_ORDER_FIELDS = ("display_name", "create_time", "update_time")
ENDPOINT_ORDER_FIELDS = MODEL_ORDER_FIELDS
VERSION_ORDER_FIELDS = ("create_time", "update_time")


@dataclass(frozen=True)
class SortKey:
    field: str
    """The REST (camelCase) field sorted on."""
    descending: bool


def parse_order_by(text: str, allowed: tuple[str, ...]) -> list[SortKey]:
    """``text`` as sort keys, the first the most significant; BadRequest names what is wrong."""
    keys = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        words = part.split()
        field = _snake(words[0])
        direction = words[1].lower() if len(words) > 1 else "asc"
        if field not in allowed:
            raise BadRequest(
                f"invalid orderBy {text!r}: cannot order by {words[0]!r}; supported fields are "
                f"{', '.join(allowed)} (each may be followed by desc)"
            )
        if len(words) > 2 or direction not in ("asc", "desc"):
            raise BadRequest(
                f"invalid orderBy {text!r}: {part!r} is not FIELD, FIELD asc or FIELD desc"
            )
        keys.append(SortKey(_camel(field), direction == "desc"))
    return keys


def ordered(found: list[tuple[int, dict]], keys: list[SortKey]) -> list[tuple[int, dict]]:
    """(position, resource) sorted by ``keys``; equal ones keep their order in ``found``.
    RFC 3339 times as the platform writes them (UTC, microseconds, ``Z``) sort as text."""
    result = list(found)
    for key in reversed(keys):  # stable sorts, least significant key first
        result.sort(key=lambda item: str(item[1].get(key.field, "")), reverse=key.descending)
    return result


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), name)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def page_in_order(
    found: list[tuple[int, dict]],
    order_by: str,
    allowed: tuple[str, ...],
    size: int,
    token: str,
    newest_first: bool = True,
) -> tuple[list[dict], str | None]:
    """One page of a List call: in ``order_by``'s order when it names one, else in the order
    ``found`` has (``newest_first`` says which way its positions run)."""
    keys = parse_order_by(order_by, allowed)
    if keys:
        return page_after(ordered(found, keys), size, token)
    return page_of(found, size, token, newest_first)
