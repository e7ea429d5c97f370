"""Reading a job file: YAML within safe limits, the format detected (a vtx template, gcloud's
CustomJobSpec for ``--config``, or a whole CustomJob), a template's ``extends:`` merged, and
``--set key.path=value`` overrides applied. The first stage of every command; it collects
problems instead of raising, so that every one is reported at once."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.core.problems import Problem
from jobs.core.safe_yaml import (
    MAX_DEPTH,
    YamlInputError,
    check_text,
    load_yaml_text,
    read_yaml_file,
    shown,
)

TEMPLATE = "template"
CUSTOM_JOB = "custom_job"
CUSTOM_JOB_SPEC = "custom_job_spec"
MAX_EXTENDS_DEPTH = 8


def detect_format(doc: Any) -> str:
    """``template``, ``custom_job_spec`` (gcloud --config) or ``custom_job`` (whole job)."""
    if isinstance(doc, dict):
        keys = {str(k) for k in doc}
        if keys & {"workerPoolSpecs", "worker_pool_specs"}:
            return CUSTOM_JOB_SPEC
        if keys & {"jobSpec", "job_spec", "displayName", "display_name"}:
            return CUSTOM_JOB
    return TEMPLATE


@dataclass
class Document:
    """A job document as read from disk, after ``extends`` and ``--set``."""

    source: str
    kind: str
    doc: Any
    problems: list[Problem] = field(default_factory=list)
    """Problems found while reading (YAML syntax, extends, overrides)."""


def read_yaml(path: Path) -> tuple[Any, list[Problem]]:
    """The document in ``path``, or the problem that stops it being read (see jobs.core.safe_yaml:
    size, UTF-8, depth and value limits, duplicate keys)."""
    try:
        return read_yaml_file(path), []
    except YamlInputError as exc:
        return None, [exc.problem]


def deep_merge(base: Any, override: Any) -> Any:
    """Mappings merge key by key; anything else in ``override`` replaces ``base``."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = deep_merge(base.get(key), value) if key in base else value
        return merged
    return copy.deepcopy(override)


def resolve_extends(
    doc: Any, path: Path, chain: tuple[Path, ...] = ()
) -> tuple[Any, list[Problem]]:
    """Merge the template ``doc`` (read from ``path``) over the one it ``extends:``."""
    if not isinstance(doc, dict) or "extends" not in doc:
        return doc, []
    doc = dict(doc)
    parent_name = doc.pop("extends")
    source = str(path)
    if not isinstance(parent_name, str) or not parent_name:
        return doc, [
            Problem("extends", "extends names another template file", "extends: base.yaml", source)
        ]
    parent_path = (path.parent / parent_name).resolve()
    if parent_path in chain or parent_path == path.resolve():
        cycle = " -> ".join(p.name for p in (*chain, path.resolve(), parent_path))
        return doc, [Problem("extends", f"extends cycle: {cycle}", "remove one extends", source)]
    if len(chain) >= MAX_EXTENDS_DEPTH:
        return doc, [
            Problem("extends", f"more than {MAX_EXTENDS_DEPTH} levels of extends", None, source)
        ]
    parent, problems = read_yaml(parent_path)
    if problems:
        return doc, [Problem("extends", p.message, p.hint, source) for p in problems]
    if not isinstance(parent, dict):
        return doc, [Problem("extends", f"{parent_name} is not a template mapping", None, source)]
    parent, problems = resolve_extends(parent, parent_path, (*chain, path.resolve()))
    return deep_merge(parent, doc), problems


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """``pools.chief.replicas=2`` -> (["pools", "chief", "replicas"], 2); values are YAML, read
    within the same limits as a file; text that is not YAML is kept as a string."""
    try:
        check_text(text)
    except YamlInputError as exc:
        raise ValueError(exc.problem.message) from None
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set {text!r}: write key.path=value")
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
    if any(p == "" for p in parts):
        raise ValueError(f"--set {text!r}: empty key in path")
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"the key path is more than {MAX_DEPTH} levels deep")
    try:
        value = load_yaml_text(raw) if raw.strip() else ""
    except YamlInputError as exc:
        if not exc.problem.message.startswith("invalid YAML"):
            raise ValueError(exc.problem.message) from None
        value = raw  # `--set args=[a` is the text "[a"
    return parts, value


def apply_override(doc: Any, parts: list[str | int], value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``parts`` (mappings are created as needed)."""
    if not parts:
        return copy.deepcopy(value)
    head, rest = parts[0], parts[1:]
    if isinstance(doc, list) and isinstance(head, int):
        if head >= len(doc):
            raise ValueError(f"index {head} is past the end of a list of {len(doc)}")
        out = list(doc)
        out[head] = apply_override(doc[head], rest, value)
        return out
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ValueError(f"cannot set {head!r} inside a {type(doc).__name__}")
    out = dict(doc)
    out[str(head)] = apply_override(doc.get(str(head)), rest, value)
    return out


def apply_overrides(doc: Any, overrides: Iterable[str], source: str) -> tuple[Any, list[Problem]]:
    problems = []
    for text in overrides:
        try:
            parts, value = parse_override(text)
            doc = apply_override(doc, parts, value)
        except ValueError as exc:
            where = f"--set {text if len(text) <= 80 else text[:80] + '…'}"
            problems.append(Problem(shown(where), str(exc), "--set key.path=value", source))
    return doc, problems


def normalise_gcloud_spec(spec: Any) -> Any:
    """gcloud's --config accepts one pool written as a mapping (Google's own examples do);
    the API wants a list."""
    if isinstance(spec, dict) and isinstance(spec.get("workerPoolSpecs"), dict):
        return {**spec, "workerPoolSpecs": [spec["workerPoolSpecs"]]}
    return spec


def load_document(path: Path, overrides: Iterable[str] = ()) -> Document:
    """Read a job file in any supported format; problems are collected, never raised."""
    source = str(path)
    doc, problems = read_yaml(path)
    if problems:
        return Document(source, TEMPLATE, None, problems)
    kind = detect_format(doc)
    if kind == TEMPLATE:
        doc, problems = resolve_extends(doc, path)
    elif kind == CUSTOM_JOB_SPEC:
        doc = normalise_gcloud_spec(doc)
    doc, override_problems = apply_overrides(doc, overrides, source)
    return Document(source, kind, doc, problems + override_problems)
