"""Run the real Pulumi program offline, under Pulumi's unit-test mocks, and record what it declares.

No cloud, no Pulumi CLI: ``infra/__main__.py`` is executed with ``runpy`` against a mock engine
(``pulumi.runtime.set_mocks(..., preview=False)``) and the configuration of the real
``Pulumi.<stack>.yaml`` (secure values replaced with dummies). The mock engine answers resource
registrations with realistic outputs (ids, selfLinks, e-mails, project numbers) and raises on
any provider function (invoke) it does not know, so a new data source cannot slip in unmocked.

Several stacks can run in one process (``vtx review --against prod`` runs dev then prod): each
run resets Pulumi's global settings and root stack, installs fresh mocks and a fresh config,
then re-executes the program module; the tests prove a prod run after a dev run equals a prod
run alone.

Public API (stable: ``infra/review`` and the policy pack use it)::

    run = run_offline("dev")                      # or run_offline("x", config_file=path)
    run.resources   # list[RecordedResource]: type, name, inputs, outputs, parent, component
    run.outputs     # stack outputs, run.outputs["platform"] parses as jobs.core.stack.StackOutputs
    rich.print(render_preview(run))               # or: python -m infra.offline dev
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import runpy
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from infra.config import ConfigError, read_stack_file
from infra.offline.mocks import INVOKE_RESULTS, RESOURCE_OUTPUTS, MockContext
from infra.offline.preview import render_preview
from infra.offline.records import OfflineRun, RecordedResource

# Re-exported: callers use them with run_offline (the tests' invoke table, the demo's preview,
# the records a run returns).
__all__ = [
    "INVOKE_RESULTS",
    "OfflineError",
    "OfflineRun",
    "RecordedResource",
    "UnknownInvokeError",
    "render_preview",
    "run_offline",
]

logger = logging.getLogger(__name__)
INFRA_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = INFRA_DIR.parent
PROGRAM = INFRA_DIR / "__main__.py"
PULUMI_PROJECT = "vtx"
PLATFORM_TYPE = "vtx:platform:Platform"
# Components in the order a reader meets them (the engine registers resources concurrently, so
# registration order is not stable: runs are sorted by component, type and name).
COMPONENT_ORDER = (
    "apis",
    "agents",
    "identity",
    "kms",
    "network",
    "shared-vpc",
    "perimeter",
    "storage",
    "registry",
    "quotas",
    "secrets",
    "observability",
    "alerts",
    "ci",
    "platform",
    "stack",
)
DUMMY_SECRET = "offline-dummy-secret"


class OfflineError(Exception):
    """The program failed under mocks. ``declared`` counts resources registered before that."""

    def __init__(self, message: str, declared: int) -> None:
        super().__init__(message)
        self.declared = declared


class UnknownInvokeError(Exception):
    """The program called a provider function the offline engine has no answer for."""


# --- the mock engine ------------------------------------------------------------------------------

_local = threading.local()


def _plain_assets(value: Any) -> Any:
    """Inputs with Pulumi's assets and archives as what they hold (a file's path from the
    repository root, an archive's members): records, inventories and reviews compare them as
    data, never as an object's address."""
    import pulumi

    if isinstance(value, pulumi.AssetArchive):
        return {"archive": {name: _plain_assets(a) for name, a in sorted(value.assets.items())}}
    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        path = Path(str(value.path)).resolve()
        return {
            "file": str(path.relative_to(PROJECT_DIR))
            if path.is_relative_to(PROJECT_DIR)
            else str(path)
        }
    if isinstance(value, pulumi.StringAsset):
        return {"text": value.text}
    if isinstance(value, dict):
        return {k: _plain_assets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_assets(v) for v in value]
    return value


def _make_mocks(ctx: MockContext) -> Any:
    import pulumi

    class Mocks(pulumi.runtime.Mocks):
        """Resource outputs from RESOURCE_OUTPUTS; invokes from INVOKE_RESULTS, else an error."""

        def __init__(self) -> None:
            self.errors: list[str] = []

        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            outputs_fn = RESOURCE_OUTPUTS.get(args.typ)
            inputs = _plain_assets(dict(args.inputs))
            if outputs_fn is None:
                resource_id, computed = f"{args.name}-id", {}
            else:
                resource_id, computed = outputs_fn(ctx, args.name, inputs)
            state = {**inputs, **computed}
            _local.last = (inputs, resource_id, state)
            return resource_id, state

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
            answer = INVOKE_RESULTS.get(args.token)
            if answer is None:
                message = (
                    f"unknown invoke {args.token!r}: the offline engine has no mock for it; add "
                    "one to INVOKE_RESULTS in infra/offline/mocks.py"
                )
                self.errors.append(message)
                raise UnknownInvokeError(message)
            return answer(ctx, args.args), []

    return Mocks()


def _make_monitor(mocks: Any) -> Any:
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """Keeps, per URN, what the stock monitor drops: inputs, parent and custom flag."""

        def __init__(self) -> None:
            super().__init__(mocks)
            self.registrations: dict[str, RecordedResource] = {}
            self._lock = threading.Lock()

        def RegisterResource(self, request: Any) -> Any:
            _local.last = None
            response = super().RegisterResource(request)
            if request.type == "pulumi:pulumi:Stack" or _local.last is None:
                return response
            inputs, resource_id, state = _local.last
            record = RecordedResource(
                type=request.type,
                name=request.name,
                inputs=inputs,
                outputs=state,
                parent=request.parent or None,
                component="",
                urn=response.urn,
                id=resource_id if request.custom else None,
                custom=bool(request.custom),
                dependencies=_dependencies(request),
            )
            with self._lock:
                self.registrations[response.urn] = record
            return response

    return RecordingMonitor()


def _dependencies(request: Any) -> tuple[str, ...]:
    urns = set(request.dependencies)
    for deps in request.propertyDependencies.values():
        urns.update(deps.urns)
    return tuple(sorted(urns))


def _config_values(raw: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Pulumi passes config to programs as strings, structured values JSON-encoded; secure
    values become dummies (the real ones never exist offline)."""
    values: dict[str, str] = {}
    secret_keys: list[str] = []

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"secure"}:
                return DUMMY_SECRET
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    for key, value in raw.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
        value = scrub(value)
        values[key] = value if isinstance(value, str) else json.dumps(value)
    return values, secret_keys


def _component_of(record: RecordedResource, registrations: dict[str, RecordedResource]) -> str:
    """Name of the Platform's child component above ``record`` ("platform" if none)."""
    below, urn = record, record.parent
    while urn is not None and urn in registrations:
        parent = registrations[urn]
        if parent.type == PLATFORM_TYPE:
            return below.name if not below.custom else "platform"
        below, urn = parent, parent.parent
    return "stack"


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A failed run leaves futures whose exception nobody retrieves. asyncio reports them when
    they are garbage-collected, at any later moment, by formatting a traceback; on CPython 3.11
    that formatting calls ast.parse, and doing so from inside another ast.parse (pytest
    rewriting an import) corrupts its depth check ("AST constructor recursion depth
    mismatch"). The run already raised the error: log the leftovers briefly instead."""
    logger.debug("offline run: %s (%r)", context.get("message"), context.get("exception"))


@contextlib.contextmanager
def _own_event_loop() -> Iterator[None]:
    """Run on a fresh event loop (own thread pool, quiet handler), then restore the caller's."""
    previous = asyncio.get_event_loop_policy().get_event_loop()
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_exception_handler)
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(previous)
        loop.close()


def run_offline(stack: str, config_file: Path | None = None) -> OfflineRun:
    """Run ``infra/__main__.py`` under mocks with ``Pulumi.<stack>.yaml`` (or ``config_file``).

    Raises :class:`infra.config.ConfigError` when the file is missing or not YAML, and
    :class:`OfflineError` when the program fails (an invalid config: then ``declared == 0``) or
    called an invoke that has no mock.
    """
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    config_file = config_file or PROJECT_DIR / f"Pulumi.{stack}.yaml"
    values, secret_keys = _config_values(read_stack_file(config_file))
    ctx = MockContext(values.get("gcp:project", "offline-project"), values.get("gcp:region", ""))
    mocks = _make_mocks(ctx)
    monitor = _make_monitor(mocks)

    def program() -> None:
        runpy.run_path(str(PROGRAM), run_name="__main__")

    def declared() -> int:
        return sum(1 for r in monitor.registrations.values() if r.custom and _is_cloud(r))

    # Everything, from the root stack on, must be created on the run's own event loop.
    with _own_event_loop(), warnings.catch_warnings():
        # pulumi_gcp warns about its own deprecated aliases when the engine loads them.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"pulumi_gcp\.")
        # Fresh globals per run: without the reset, set_mocks keeps the previous run's root
        # stack (bound to the previous monitor) and the second stack's resources would be lost.
        settings.reset_options(project=PULUMI_PROJECT, stack=stack, preview=False)
        set_all_config(values, secret_keys)
        pulumi.runtime.set_mocks(
            mocks, project=PULUMI_PROJECT, stack=stack, preview=False, monitor=monitor
        )
        root = settings.get_root_resource()
        try:
            _sync_await(run_pulumi_func(program))
            outputs = {
                name: _sync_await(pulumi.Output.from_input(value).future())
                for name, value in root.outputs.items()
            }
        except Exception as exc:
            raise OfflineError(f"stack {stack!r} ({config_file}): {exc}", declared()) from exc
    if mocks.errors:
        raise OfflineError("; ".join(mocks.errors), declared())

    by_urn = monitor.registrations
    resolved = sorted(
        (
            RecordedResource(**{**r.__dict__, "component": _component_of(r, by_urn)})
            for r in by_urn.values()
        ),
        key=_sort_key,
    )
    return OfflineRun(
        stack=stack,
        config_file=config_file,
        resources=[r for r in resolved if r.custom and _is_cloud(r)],
        outputs=outputs,
        components=[r for r in resolved if not r.custom],
    )


def _sort_key(record: RecordedResource) -> tuple[int, str, str, str]:
    # A further region's key (`kms-us-east4`, capacity_regions) reads after the main one.
    family = "kms" if record.component.startswith("kms-") else record.component
    known = family in COMPONENT_ORDER
    rank = COMPONENT_ORDER.index(family) if known else len(COMPONENT_ORDER)
    return rank, record.component, record.type, record.name


def _is_cloud(record: RecordedResource) -> bool:
    return not record.type.startswith("pulumi:providers:")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.offline",
        description="Offline preview of a vtx stack: the real program under Pulumi mocks.",
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.<stack>.yaml")
    parser.add_argument("--config", type=Path, help="use this Pulumi.<stack>.yaml instead")
    parser.add_argument("--json", action="store_true", help="print the platform output as JSON")
    args = parser.parse_args(argv)
    console = Console()
    try:
        run = run_offline(args.stack, args.config)
    except (ConfigError, OfflineError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 1
    if args.json:
        print(json.dumps(run.outputs["platform"], indent=2))
    else:
        console.print(render_preview(run))
    return 0
