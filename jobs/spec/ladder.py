"""A capacity ladder: the alternatives a template lists under ``capacity.ladder`` (other
regions, shapes, strategies), each the base template with overrides, and the pure decisions
`vtx launch` takes while it walks them: which rung to submit next, and what an attempt's state,
error and waiting time say (wait, move on, done, stop).

Every rung is a whole job document (validated and priced like the base); all of them run under
one run id, so each attempt resumes from the checkpoints the previous one committed. One field
is a rung's own and never carried from the base: ``persistent_resource``. A warm pool is a
capacity choice like the rung itself (warm pool first, then Spot elsewhere): a later rung that
inherited it would wait on the same full pool, or be refused for its region or Spot; a rung
that wants a resource names it (``persistent_resource: ID``). The
submitting and watching are the command's (vtx.commands.jobs), with its own clock."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.problems import Problem
from jobs.core.states import JobState, bare_name, is_final, is_waiting, succeeded
from jobs.spec.document import apply_override
from jobs.spec.template import Capacity

OWN_KEYS = ("persistent_resource",)
"""What the base does not pass on to its rungs: a rung names its own (see the module's doc)."""
FIXED_KEYS = ("name", "capacity", "extends", "guard")
"""What a rung may not change: the name is the run id's prefix and label, a rung has no
ladder of its own, and the run's record holds one guard for all its rungs."""
CAPACITY_FAILURE = re.compile(
    r"STOCKOUT|resources? (are )?insufficient|resource[_ ]exhausted|RESOURCE_POOL_EXHAUSTED"
    r"|maxWaitDuration",
    re.IGNORECASE,
)
"""How a job that got no machines fails: Spot's STOCKOUT, "Resources are insufficient in
region", ZONE_RESOURCE_POOL_EXHAUSTED, FLEX_START past its maxWaitDuration."""
RESOURCE_EXHAUSTED = 8
"""google.rpc.Code of a job that failed for capacity (the error's ``code``)."""
QUOTA_HTTP = 429

WAIT, NEXT, PLACED, DONE, STOP = "wait", "next", "placed", "done", "stop"
"""Decisions on an attempt: keep watching; cancel it and try the next rung; it has its machines
(the ladder is done with it); it ended well; it ended for another reason than capacity."""


@dataclass(frozen=True)
class RungDocument:
    """One rung as a whole template document (no ``capacity`` left in it)."""

    number: int
    """1 for the base template, 2.. for ``capacity.ladder`` in order."""
    doc: dict[str, Any]
    max_wait_s: float | None
    """How long it may wait QUEUED/PENDING; None: as long as Vertex lets it."""
    where: str
    """Where the user wrote it: ``(base)`` or ``capacity.ladder[N]``."""


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str | None = None


def _key_problems(where: str, key: str) -> list[Problem]:
    parts = key.split(".")
    if not key or any(p == "" for p in parts):
        return [Problem(f"{where}.set", f"{key!r} is not a key path", "pools.chief.machine: X")]
    if parts[0] in FIXED_KEYS:
        why = f"a rung cannot change {parts[0]!r}: every rung runs as the base template's run"
        return [Problem(f"{where}.set.{key}", why, "change region, pools or scheduling")]
    return []


def _rung_doc(base: dict[str, Any], rung: dict[str, Any], where: str) -> tuple[Any, list[Problem]]:
    """The base document (less OWN_KEYS) with the rung's ``persistent_resource``, ``region``
    and ``set`` applied, as ``--set`` would."""
    problems: list[Problem] = []
    doc: Any = {k: v for k, v in base.items() if k not in OWN_KEYS}
    changes = dict(rung.get("set") or {})
    for shorthand in ("persistent_resource", "region"):
        if rung.get(shorthand) is not None:
            changes = {shorthand: rung[shorthand], **changes}
    if not changes and doc == base:  # off the base's warm pool is a change
        hint = "{region: us-east4} or {set: {scheduling.strategy: standard}}"
        return doc, [Problem(where, "a rung changes nothing: it would repeat the one before", hint)]
    for key, value in changes.items():
        key_problems = _key_problems(where, str(key))
        problems += key_problems
        if key_problems:
            continue
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in str(key).split(".")]
        try:
            doc = apply_override(doc, parts, value)
        except ValueError as exc:
            problems.append(Problem(f"{where}.set.{key}", str(exc), "set: {key.path: value}"))
    return doc, problems


def rung_documents(doc: dict[str, Any]) -> tuple[list[RungDocument], list[Problem]]:
    """The base and every rung of a template whose ``capacity`` passed the structural check,
    as whole documents; the problems of rungs that could not be built (left out)."""
    capacity = Capacity.model_validate(doc.get("capacity") or {})
    base = {k: v for k, v in doc.items() if k != "capacity"}
    rungs = [RungDocument(1, base, capacity.max_wait_s, "(base)")]
    problems: list[Problem] = []
    raw = (doc.get("capacity") or {}).get("ladder") or []
    for i, (rung, written) in enumerate(zip(capacity.ladder, raw, strict=True)):
        where = f"capacity.ladder[{i}]"
        rung_doc, rung_problems = _rung_doc(base, written, where)
        problems += rung_problems
        if rung_problems:  # a half-built rung would only repeat them in other words
            continue
        max_wait_s = rung.max_wait_s if rung.max_wait is not None else capacity.max_wait_s
        rungs.append(RungDocument(i + 2, rung_doc, max_wait_s, where))
    return rungs, problems


# ---- the walk's decisions -----------------------------------------------------------------------


def next_rung(hopeless: Sequence[str | None], start: int) -> int | None:
    """The index of the first rung at or after ``start`` not known to be hopeless (``hopeless``:
    per rung, why it cannot run, e.g. zero quota in its region; None when it may)."""
    return next((i for i in range(start, len(hopeless)) if hopeless[i] is None), None)


def is_capacity_failure(error: str | None, code: int | None = None) -> bool:
    """Whether a failed job failed for want of machines (not for its own program)."""
    return code == RESOURCE_EXHAUSTED or bool(error and CAPACITY_FAILURE.search(error))


def capacity_reason(error: str | None) -> str:
    """A short name for a capacity failure, for the walk's one-line reports."""
    if error and "STOCKOUT" in error.upper():
        return "STOCKOUT"
    if error and "maxWaitDuration" in error:
        return "FLEX_START max wait passed"
    return "resources exhausted"


def on_create_error(http_code: int | None) -> Decision:
    """A create refused with 429 is the quota (the preflight could not see it, or it changed):
    the next rung may be in another region or on another metric. Anything else stops the walk."""
    if http_code == QUOTA_HTTP:
        return Decision(NEXT, "quota exceeded (429 on create)")
    return Decision(STOP, None)


def _waited(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def judge(
    state: str,
    error: str | None,
    waited_s: float,
    max_wait_s: float | None,
    *,
    last: bool,
    code: int | None = None,
) -> Decision:
    """What an attempt's state says, ``waited_s`` after it was created. The last rung is never
    given up for waiting: there is nothing to move on to, and Vertex bounds its wait."""
    if succeeded(state):
        return Decision(DONE)
    if state == JobState.RUNNING:
        return Decision(PLACED)
    if state == JobState.FAILED and is_capacity_failure(error, code):
        return Decision(NEXT, f"{capacity_reason(error)} after {_waited(waited_s)}")
    if is_final(state):
        return Decision(STOP, f"{bare_name(state)}: {error or 'no error given'}")
    if is_waiting(state) and not last and max_wait_s is not None and waited_s >= max_wait_s:
        return Decision(NEXT, f"still {bare_name(state)} after {_waited(waited_s)} (max_wait)")
    return Decision(WAIT)


def after_running(state: str, error: str | None, code: int | None = None) -> Decision:
    """An attempt that had its machines, once it ended: a capacity failure (a Spot job preempted
    with no Spot left to come back to, Vertex's stockout retries spent) moves on as it would
    have before it ran; it resumes from the checkpoints it committed. Success is done; any
    other end stops the walk (the job's own failure: another rung would fail it too)."""
    if succeeded(state):
        return Decision(DONE)
    if state == JobState.FAILED and is_capacity_failure(error, code):
        return Decision(NEXT, f"{capacity_reason(error)} while running")
    return Decision(STOP, f"{bare_name(state)}: {error or 'no error given'}")
