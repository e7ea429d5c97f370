"""What a review reads: the stack's resources, from an offline run or a ``pulumi preview --json``.

Both sources are reduced to the same ``ReviewSource`` so one builder serves them. The preview
document is the engine's preview digest (``pulumi preview --json``): ``config``, ``steps`` (each
with ``op``, ``urn`` and ``newState`` = {``type``, ``custom``, ``inputs``, ``outputs``,
``parent``...}), ``diagnostics`` and ``changeSummary``. Secret values in it are already
``"[secret]"``; unknown values are the engine's unknown sentinel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.offline.program import PROJECT_DIR, run_offline
from jobs.core.user_io import UserFileError, load_json_text, read_user_file, shown_path

MAX_PREVIEW_BYTES = 16 << 20
"""A preview of this platform's stack is tens of KB (tests/infra/review/fixtures: 22 KB);
16 MiB leaves room for stacks hundreds of times larger and still reads in well under a second."""
STACK_TYPE = "pulumi:pulumi:Stack"
# Preview steps whose resource will not exist after the update.
_GONE_OPS = frozenset(
    {"delete", "delete-replaced", "discard", "discard-replaced", "remove-pending-replace"}
)
_NO_COMPONENT = "stack"


class ReviewSourceError(Exception):
    """The review's input could not be read; the message says which and why."""


@dataclass(frozen=True)
class ReviewResource:
    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    component: str
    """The component it belongs to (``network``, ``storage``...; see ``_components``)."""
    custom: bool = True
    """False for ComponentResources and the root stack: groupings, not cloud resources."""
    op: str = "create"


@dataclass(frozen=True)
class ReviewSource:
    stack: str
    environment: str | None
    origin: str
    resources: tuple[ReviewResource, ...]
    platform: Mapping[str, Any]
    """The ``platform`` stack output (StackOutputs fields), {} when not known."""


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _urn_type(urn: str) -> str:
    # urn:pulumi:STACK::PROJECT::parent$type::name -> the last type of the chain.
    return urn.split("::")[2].rsplit("$", 1)[-1]


def _platform_environment(
    platform: Mapping[str, Any], config_environment: str | None
) -> str | None:
    env = platform.get("environment") if isinstance(platform, Mapping) else None
    return env if isinstance(env, str) and env else config_environment


# --- offline run -----------------------------------------------------------------------------


def stacks(project_dir: Path = PROJECT_DIR) -> list[str]:
    """The stacks that have a ``Pulumi.<stack>.yaml`` in the project."""
    return sorted(
        path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        for path in project_dir.glob("Pulumi.*.yaml")
    )


def require_stack(stack: str, project_dir: Path = PROJECT_DIR) -> None:
    """A misspelt stack name fails naming the stacks there are, not only the missing file."""
    if (project_dir / f"Pulumi.{stack}.yaml").is_file():
        return
    known = ", ".join(stacks(project_dir)) or "none"
    raise ReviewSourceError(
        f"no stack {stack!r}: {project_dir / f'Pulumi.{stack}.yaml'} does not exist; "
        f"stacks here: {known} (or review a real preview with --preview-json FILE)"
    )


def from_offline(stack: str, config_file: Path | None = None) -> ReviewSource:
    """Run the infra program under Pulumi's mocks (``infra.offline.program``); review what it
    declares."""
    if config_file is None:
        require_stack(stack)
    run = run_offline(stack, config_file)
    platform = dict(run.outputs.get("platform") or {})
    resources = []
    for recorded in run.resources:
        resource_type = recorded.type
        name = recorded.name
        urn = getattr(recorded, "urn", None) or f"urn:pulumi:{stack}::vtx::{resource_type}::{name}"
        custom = getattr(recorded, "custom", None)
        if custom is None:
            custom = resource_type.split(":", 1)[0] not in ("vtx", "pulumi")
        component = getattr(recorded, "component", None)
        resources.append(
            ReviewResource(
                urn=urn,
                type=resource_type,
                name=name,
                inputs=dict(recorded.inputs or {}),
                outputs=dict(recorded.outputs or {}),
                component=str(component) if component else _NO_COMPONENT,
                custom=bool(custom),
            )
        )
    resources.append(
        ReviewResource(
            urn=f"urn:pulumi:{stack}::vtx::{STACK_TYPE}::vtx-{stack}",
            type=STACK_TYPE,
            name=f"vtx-{stack}",
            inputs={},
            outputs=dict(run.outputs),
            component=_NO_COMPONENT,
            custom=False,
        )
    )
    return ReviewSource(
        stack=stack,
        environment=_platform_environment(platform, None) or stack,
        origin="offline run of the infra program under Pulumi mocks",
        resources=tuple(resources),
        platform=platform,
    )


# --- pulumi preview --json -------------------------------------------------------------------


def _config_environment(config: Mapping[str, Any]) -> str | None:
    raw = config.get("vtx:platform")
    try:
        platform = load_json_text(raw) if isinstance(raw, str) else raw
    except ValueError:  # not JSON, or nested past the parser
        return None
    env = platform.get("environment") if isinstance(platform, Mapping) else None
    return env if isinstance(env, str) else None


def _components(states: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """URN -> component label, named like the offline run names them.

    The program nests every component under one top-level ``Platform`` component; a resource
    belongs to the top-level component's child above it (``network``, ``storage``...), to
    ``platform`` when the Platform declares it directly, to ``stack`` when outside any."""
    labels: dict[str, str] = {}
    for urn in states:
        chain: list[str] = []
        parent = states[urn].get("parent")
        while parent:
            state = states.get(parent, {})
            parent_type = state.get("type") or _urn_type(parent)
            if parent_type != STACK_TYPE and not state.get("custom", False):
                chain.append(parent)
            parent = state.get("parent")
        if len(chain) >= 2:
            labels[urn] = _urn_name(chain[-2])
        else:
            labels[urn] = "platform" if chain else _NO_COMPONENT
    return labels


def from_preview_json(path: Path, stack: str) -> ReviewSource:
    """Review what a real ``pulumi preview --json`` would leave in place."""
    try:
        data = read_user_file(
            path, MAX_PREVIEW_BYTES, too_big="a preview of this platform is tens of KB"
        )
    except UserFileError as exc:  # missing, a directory, a FIFO or device, too big
        raise ReviewSourceError(f"preview file {exc}") from None
    try:
        digest = load_json_text(data)
    except ValueError as exc:
        raise ReviewSourceError(f"preview file {shown_path(path)}: {exc}") from None
    steps = digest.get("steps") if isinstance(digest, Mapping) else None
    if not isinstance(steps, list):
        raise ReviewSourceError(
            f"{path} has no 'steps' list: write it with "
            f"`pulumi preview --json --stack {stack} > {path}`"
        )
    states: dict[str, Mapping[str, Any]] = {}
    ops: dict[str, str] = {}
    for index, step in enumerate(steps):
        new_state = step.get("newState")
        if step.get("op") in _GONE_OPS or not isinstance(new_state, Mapping):
            continue
        urn = step.get("urn") or new_state.get("urn")
        if not urn:
            raise ReviewSourceError(f"{path}: steps[{index}] has no urn")
        states[urn] = new_state
        ops[urn] = str(step.get("op", "same"))
    components = _components(states)
    resources = tuple(
        ReviewResource(
            urn=urn,
            type=str(state.get("type") or _urn_type(urn)),
            name=_urn_name(urn),
            inputs=state.get("inputs") or {},
            outputs=state.get("outputs") or {},
            component=components[urn],
            custom=bool(state.get("custom", False)),
            op=ops[urn],
        )
        for urn, state in states.items()
    )
    root = next((r for r in resources if r.type == STACK_TYPE), None)
    platform = root.outputs.get("platform") if root else None
    platform = platform if isinstance(platform, Mapping) else {}
    config_env = _config_environment(digest.get("config") or {})
    return ReviewSource(
        stack=stack,
        environment=_platform_environment(platform, config_env) or stack,
        origin=f"pulumi preview --json ({path.name})",
        resources=resources,
        platform=platform,
    )
