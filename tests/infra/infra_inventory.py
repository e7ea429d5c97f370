"""Inventories of expected resources per stack, in the manner of Cloud Foundation Fabric.

``inventories/<stack>.yaml`` lists, per resource (by logical name), its type, component and a
subset of its inputs; and exact counts per type. Comparison rules:
- every listed input must match (dicts recursively as subsets, lists element by element);
- the value ``__missing__`` asserts the input is absent;
- counts per type and the total must match exactly; a resource listed but not declared fails.

Regenerate after an intended change, then review the diff like code:

    .venv/bin/python tests/infra/infra_inventory.py dev prod
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

from infra.offline.program import run_offline

INVENTORIES = Path(__file__).resolve().parent / "inventories"
REGENERATE = ".venv/bin/python tests/infra/infra_inventory.py"
MISSING = "__missing__"
# Security-relevant inputs whose absence is asserted when a stack does not set them (the
# inventory then fails if, say, dev buckets suddenly got a key or prod lost one).
WATCHED_ABSENT = {
    "gcp:storage/bucket:Bucket": ("encryption",),
    "gcp:artifactregistry/repository:Repository": ("kmsKeyName",),
    "gcp:vertex/aiTensorboard:AiTensorboard": ("encryptionSpec",),
    "gcp:vertex/aiPersistentResource:AiPersistentResource": ("encryptionSpec",),
    "gcp:compute/subnetwork:Subnetwork": ("logConfig",),
}


def normalized(value: Any) -> Any:
    """Whole floats as ints (protobuf Structs carry every number as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


CONTROLLER_SOURCE = re.compile(r"functions/controller-[0-9a-f]{16}\.zip")
UNHASHED = "functions/controller-<content hash>.zip"
REPOSITORY_SOURCE = "the repository's jobs/ (infra.components.controller.repository_files)"


def stable(value: Any) -> Any:
    """Inputs without what every change to ``jobs/`` changes: the content hash in the name of
    the controller's source object, and that object's list of files
    (tests/infra/components/test_controller.py checks both)."""
    if isinstance(value, str):
        return CONTROLLER_SOURCE.sub(UNHASHED, value)
    if isinstance(value, list):
        return [stable(v) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: stable(v) for k, v in value.items()}
    if value.get("name") == UNHASHED and "source" in value:
        archive = value["source"].get("archive", {})
        kept = {k: v for k, v in archive.items() if not k.startswith("jobs/")}
        value["source"] = {"archive": kept | {"jobs/": REPOSITORY_SOURCE}}
    return value


def build_inventory(run: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for resource in run.resources:
        inputs = stable(normalized(resource.inputs))
        for key in WATCHED_ABSENT.get(resource.type, ()):
            inputs.setdefault(key, MISSING)
        values[resource.name] = {
            "type": resource.type,
            "component": resource.component,
            "inputs": inputs,
        }
    return {"values": values, "counts": run.counts() | {"total": len(run.resources)}}


def _match(expected: Any, actual: Any, path: str, problems: list[str]) -> None:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            problems.append(f"{path}: expected a mapping, got {actual!r}")
            return
        for key, value in expected.items():
            if value == MISSING:
                if key in actual:
                    problems.append(f"{path}.{key}: expected absent, got {actual[key]!r}")
            elif key not in actual:
                problems.append(f"{path}.{key}: missing (expected {value!r})")
            else:
                _match(value, actual[key], f"{path}.{key}", problems)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            problems.append(f"{path}: expected {expected!r}, got {actual!r}")
            return
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            _match(want, got, f"{path}[{index}]", problems)
    elif expected != actual:
        problems.append(f"{path}: expected {expected!r}, got {actual!r}")


def compare(inventory: dict[str, Any], run: Any) -> list[str]:
    """Every way ``run`` departs from ``inventory`` (empty when it matches)."""
    problems: list[str] = []
    by_name = {r.name: r for r in run.resources}
    for name, expected in (inventory.get("values") or {}).items():
        resource = by_name.get(name)
        if resource is None:
            problems.append(f"{name}: listed in the inventory but not declared")
            continue
        _match(
            {k: v for k, v in expected.items() if k != "inputs"},
            {"type": resource.type, "component": resource.component},
            name,
            problems,
        )
        _match(expected.get("inputs") or {}, stable(normalized(resource.inputs)), name, problems)
    actual_counts = run.counts() | {"total": len(run.resources)}
    expected_counts = inventory.get("counts") or {}
    for type_token in sorted(set(expected_counts) | set(actual_counts)):
        want, got = expected_counts.get(type_token, 0), actual_counts.get(type_token, 0)
        if want != got:
            problems.append(f"count of {type_token}: expected {want}, got {got}")
    return problems


def load(stack: str) -> dict[str, Any]:
    return yaml.safe_load((INVENTORIES / f"{stack}.yaml").read_text())


def write(stack: str) -> Path:
    path = INVENTORIES / f"{stack}.yaml"
    header = (
        f"# Expected resources of stack {stack} (generated, then reviewed like code).\n"
        f"# Regenerate after an intended change: {REGENERATE} {stack}\n"
    )
    body = yaml.safe_dump(build_inventory(run_offline(stack)), sort_keys=False, width=100)
    path.write_text(header + body)
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or ["dev", "prod"]:
        print(f"wrote {write(name)}")
