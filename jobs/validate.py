"""Validation entry points: every problem in a job, reported at once, before anything reaches the
API. Cheap to import (no aiplatform, pulumi or torch): `vtx validate` and the local control
plane's 400 answers both run through here.

- ``validate_custom_job(job)``: a REST-form CustomJob dict (camelCase, as the API receives it).
- ``validate_custom_job_spec(spec)``: a gcloud ``--config`` CustomJobSpec dict.
- ``validate_template(template)`` / ``validate_template_doc(doc)``: a vtx template.
- ``validate_document(doc)``: any of the above, format auto-detected.
"""

from __future__ import annotations

import re
from typing import Any

from jobs.catalog import Catalog, load_catalog
from jobs.durations import format_duration_s, parse_duration_s
from jobs.facts import JobFacts, facts_from_rest_job, facts_from_rest_spec, facts_from_template
from jobs.problems import Problem
from jobs.rest_schema import ROOT, integer_range, message_fields
from jobs.rules import run_rules
from jobs.safe_yaml import join_path, short_repr

SPEC_MESSAGE = "google.cloud.aiplatform.v1.CustomJobSpec"
NO_PERSISTENT_DISK = (
    "CustomJob has no persistent disk: write checkpoints to gs:// via AIP_CHECKPOINT_DIR "
    "(the stack sets baseOutputDirectory)"
)
USE_SPOT = "use scheduling.strategy: SPOT"
# Fields that tutorials invent, by their name lower-cased without '_' -> what to write instead.
INVENTED_FIELDS = {
    "persistentdisksizegb": NO_PERSISTENT_DISK,
    "persistentdisktype": NO_PERSISTENT_DISK,
    "persistentdisk": NO_PERSISTENT_DISK,
    "persistentdisks": NO_PERSISTENT_DISK,
    "persistentdiskspec": NO_PERSISTENT_DISK,
    "usespot": USE_SPOT,
    "spot": USE_SPOT,
    "preemptible": USE_SPOT,
    "usepreemptible": USE_SPOT,
    "region": "the region is the endpoint's (the stack's), not a CustomJob field",
}


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _normalised(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_KIND_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "bool": (bool,),
    "number": (int, float, str),
    "duration": (str,),
    "timestamp": (str,),
    "map": (dict,),
    "message": (dict,),
    "enum": (str,),
    "bytes": (str,),
}
_KIND_EXAMPLES = {
    "string": "a string",
    "bool": "true or false",
    "number": "a number",
    "duration": 'a duration in seconds such as "86400s"',
    "timestamp": "an RFC 3339 time",
    "map": "a mapping",
    "message": "a mapping",
    "enum": "a value name",
    "bytes": "base64 text",
}
# Protobuf JSON durations are seconds with an 's' suffix; int64 may travel as a string.
_PROTO_DURATION = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_INT_STRING = re.compile(r"^-?\d+$")
_INT_MAX_CHARS = 21  # "-" and 20 digits: longer digit strings are beyond any 64-bit integer


def _unknown_field(key: str, fields: dict[str, dict], path: str) -> Problem:
    camel = camel_case(key)
    if camel != key and camel in fields:
        return Problem(
            path,
            f"snake_case key {key!r}: gcloud's --config YAML and the REST API are camelCase",
            f"write {camel}",
        )
    hint = INVENTED_FIELDS.get(_normalised(key))
    if hint is None:
        import difflib

        guess = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
        hint = (
            f"did you mean {guess[0]}?" if guess else f"known fields: {', '.join(sorted(fields))}"
        )
    return Problem(path, f"unknown field {key!r}", hint)


def _check_number(value: Any, scalar: str, path: str) -> list[Problem]:
    """What protobuf's JSON parser would refuse in an integer field: fractions, and values
    outside the proto type (replicaCount is int64, acceleratorCount and bootDiskSizeGb int32)."""
    if integer_range(scalar) is None:
        return []
    if isinstance(value, float):
        if not value.is_integer():
            return [Problem(path, f"expected a whole number, got {value!r}")]
        value = int(value)
    elif isinstance(value, str):
        # int() refuses 4,300 digits or more; 21 characters already exceed any 64-bit integer.
        value = int(value) if len(value) <= _INT_MAX_CHARS else value
    return integer_range_problems(value, scalar, path)


def integer_range_problems(value: int | str, scalar: str, path: str) -> list[Problem]:
    """``value`` (an int, or the text of one too long to convert) outside the proto type."""
    low, high = integer_range(scalar) or (0, 0)
    if isinstance(value, int) and low <= value <= high:
        return []
    field = re.sub(r"\[\d+\]$", "", path).rsplit(".", 1)[-1]
    return [
        Problem(
            path,
            f"{short_repr(value) if isinstance(value, str) else value} is out of range: the API "
            f"stores {field} as {scalar} ({low:,} to {high:,})",
            f"a whole number up to {high:,}",
        )
    ]


def _check_value(value: Any, spec: dict, path: str) -> list[Problem]:
    kind = spec["kind"]
    if kind in ("struct", "value"):
        return []
    expected = _KIND_TYPES[kind]
    ok = isinstance(value, expected) and not (kind == "number" and isinstance(value, bool))
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        ok = False
    if kind == "number" and isinstance(value, str) and not _INT_STRING.match(value):
        ok = False
    if not ok:
        # Environment entries may hold credentials (`- "HF_TOKEN=hf_..."`): name the type only.
        got = type(value).__name__ if ".env[" in path else short_repr(value)
        return [Problem(path, f"expected {_KIND_EXAMPLES[kind]}, got {got}")]
    if kind == "number":
        return _check_number(value, spec.get("scalar", "double"), path)
    if kind == "duration" and not _PROTO_DURATION.match(value):
        seconds = parse_duration_s(value)
        hint = f"write {format_duration_s(seconds)}" if seconds is not None else 'e.g. "86400s"'
        return [Problem(path, f"invalid duration {short_repr(value)}: the API takes seconds", hint)]
    if kind == "enum" and value not in spec["values"]:
        values = [v for v in spec["values"] if not v.endswith("_UNSPECIFIED")]
        upper = str(value).upper()
        hint = f"write {upper}" if upper in values else f"one of {', '.join(values)}"
        return [Problem(path, f"invalid value {short_repr(value)}", hint)]
    if kind == "message":
        return check_rest_fields(value, spec["type"], path)
    return []


def check_rest_fields(doc: Any, message: str = ROOT, path: str = "") -> list[Problem]:
    """Unknown fields, snake_case keys, wrong shapes and invalid enum values in a REST document,
    walking the schema generated from the installed protos."""
    if not isinstance(doc, dict):
        return [Problem(path or "(top)", f"expected a mapping, got {type(doc).__name__}")]
    fields = message_fields(message)
    problems: list[Problem] = []
    for key, value in doc.items():
        where = join_path(path, str(key))
        spec = fields.get(key) if isinstance(key, str) else None
        if spec is None:
            problems.append(_unknown_field(str(key), fields, where))
        elif value is None:
            continue
        elif spec["repeated"]:
            if not isinstance(value, list):
                problems.append(Problem(where, f"expected a list, got {type(value).__name__}"))
                continue
            # An empty pool `{}` is how a position is skipped; it has no fields to check.
            for i, item in enumerate(value):
                problems.extend(_check_value(item, spec, join_path(where, i)))
        else:
            problems.extend(_check_value(value, spec, where))
    return problems


def _dedupe(problems: list[Problem]) -> list[Problem]:
    """Drop repeats: template-level env is seen once per pool."""
    return list(dict.fromkeys(problems))


def _finish(
    structural: list[Problem], facts: JobFacts, cat: Catalog, source: str | None
) -> list[Problem]:
    # A field the structural check rejected is not judged again by the rules.
    rejected = {p.path for p in structural}
    ruled = [p for p in run_rules(facts, cat) if p.path not in rejected]
    problems = _dedupe(structural + ruled)
    if source is not None:
        problems = [Problem(p.path, p.message, p.hint, source) for p in problems]
    return problems


def validate_custom_job(
    job: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a REST-form CustomJob (camelCase: ``displayName``, ``jobSpec``, ...).

    ``region`` (the endpoint's location, when known) enables the regional availability checks."""
    cat = load_catalog()
    structural = check_rest_fields(job)
    if not isinstance(job, dict):
        return structural
    if not isinstance(job.get("jobSpec"), dict):
        structural.append(
            Problem("jobSpec", "jobSpec is required", "jobSpec: {workerPoolSpecs: [...]}")
        )
    elif not job["jobSpec"].get("workerPoolSpecs"):
        structural.append(
            Problem("jobSpec.workerPoolSpecs", "at least one worker pool is required", None)
        )
    facts = facts_from_rest_job(job)
    facts.region = region
    return _finish(structural, facts, cat, source)


def validate_custom_job_spec(
    spec: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a gcloud ``--config`` CustomJobSpec (``workerPoolSpecs`` at the top).
    Its display name comes from the gcloud command line, so none is required here."""
    from jobs.spec import normalise_gcloud_spec

    cat = load_catalog()
    spec = normalise_gcloud_spec(spec)
    structural = check_rest_fields(spec, SPEC_MESSAGE)
    if not isinstance(spec, dict):
        return structural
    if not spec.get("workerPoolSpecs"):
        structural.append(Problem("workerPoolSpecs", "at least one worker pool is required"))
    facts = facts_from_rest_spec(spec, display_name="(from the command line)")
    facts.region = region
    return _finish(structural, facts, cat, source)


def validate_template_doc(
    doc: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a vtx template document (after ``extends`` and ``--set``)."""
    from jobs.spec import template_structure_problems

    cat = load_catalog()
    structural = template_structure_problems(doc)
    if not isinstance(doc, dict):
        return _with_source(structural, source)
    facts = facts_from_template(doc, cat)
    if region is not None and facts.region is None:
        facts.region = region
    return _finish(structural, facts, cat, source)


def validate_template(template: Any, region: str | None = None) -> list[Problem]:
    """Every problem in a parsed JobTemplate (``region``: the stack's, if the template has none)."""
    return validate_template_doc(template.to_document(), region=region)


def validate_document(
    doc: Any, kind: str, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Dispatch on a detected format (see ``jobs.spec.detect_format``)."""
    if kind == "custom_job":
        return validate_custom_job(doc, region, source)
    if kind == "custom_job_spec":
        return validate_custom_job_spec(doc, region, source)
    return validate_template_doc(doc, region, source)


def _with_source(problems: list[Problem], source: str | None) -> list[Problem]:
    return [Problem(p.path, p.message, p.hint, source) for p in problems] if source else problems


def validate_compiled(
    template: Any, stack: Any, run_id: str, source: str, policy: bool = True
) -> tuple[dict | None, list[Problem]]:
    """Compile ``template`` for ``stack`` (REST dict, no aiplatform import) and return it with
    every reason not to submit it: what the stack cannot give, the API rules on the compiled
    job, and (``policy``) the organisation's job policies."""
    from jobs.compile import CompileError, custom_job_dict

    try:
        job = custom_job_dict(template, stack, run_id)
    except CompileError as exc:
        return None, _with_source(exc.problems, source)
    region = None if stack.is_local else stack.region
    problems = validate_custom_job(job, region=region, source=f"{source} (compiled)")
    if policy:
        from jobs.policies import check_job_policies

        problems += _with_source(check_job_policies(job, stack), f"{source} (policy)")
    return job, problems
