"""Fixtures shared by every test package: a real GCS emulator server on 127.0.0.1, the local
platform, and StackOutputs builders (`stack_outputs`, `dev_stack`, the `stack` fixture)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobs.local.plumbing.ports import free_port

if TYPE_CHECKING:
    from jobs.core.stack import StackOutputs
    from jobs.local.platform.state import PlatformState

# The emulator speaks the JSON API only; gcsfs otherwise probes each bucket over gRPC for its
# type and waits 60 s per probe. Must be set before gcsfs is imported anywhere.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

# One torch/OpenMP thread per process: each xdist worker and every trainer or replica process a
# test starts (they inherit this environment) would otherwise take a thread per core, and on a
# 2-core machine running two workers the spinning threads oversubscribe it. Measured side by side
# (two tests at once, 2 cores): 136 s -> 81 s and 187 s -> 147 s. A test that needs more threads
# sets them itself; one set outside pytest wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Fixtures that a jobs test and its CLI twin in tests/vtx both use, defined once beside the jobs
# test; listed here so that pytest finds them in either folder.
pytest_plugins = [
    "tests.chromium",  # `browser`, for the review's page and the goodput report's
    "tests.jobs.local.platform.capacity_helpers",
    "tests.jobs.runs.log_fakes",
    "tests.jobs.serving.endpoint_fakes",
    "tests.jobs.quota.quota_fakes",
]

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
TEST_DATA = TESTS / "data"
"""Files several test folders read: an exported dev stack, a Cloud Quotas page, the snapshots."""
SNAPSHOTS = TEST_DATA / "snapshots"
TEMPLATES = REPO / "jobs" / "templates"
STACK_DEV_JSON = TEST_DATA / "stack-dev.json"
"""A dev stack's exported outputs, as `pulumi stack output platform --json` writes them."""
HANG_S = 300.0
"""How long a test waits for what it waits on (a port, a job's end, a log line) before it calls
the wait hung. Only a hang may reach it, never a slow start: two cores shared by xdist workers,
flooding replicas and a cold first import take minutes, not seconds. Under pytest-timeout's 600 s
per test, so a hung wait fails with its own message."""


SLOW_WITHOUT_COST_S = 10.0
"""The cost a `slow` mark without ``cost_s`` stands for when modules are ordered."""


def _module_cost(item: pytest.Item) -> float:
    mark = item.get_closest_marker("slow")
    if mark is None:
        return 0.0
    return float(mark.kwargs.get("cost_s", SLOW_WITHOUT_COST_S))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest modules first (by their `slow` marks' ``cost_s``), the rest in file order.

    `make test` hands whole modules to xdist workers in this order (`--dist loadscope
    --no-loadscope-reorder`), so the minutes-long end-to-end modules start at once and the
    thousands of quick tests fill in around them, instead of one of them starting last and
    keeping a worker busy alone at the end. Every worker sorts the same collection the same
    way (the sort is stable), as xdist requires."""
    cost: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        cost[module] = max(cost.get(module, 0.0), _module_cost(item))
    items.sort(key=lambda item: -cost[item.nodeid.split("::", 1)[0]])


def stack_outputs(**changes: object) -> StackOutputs:
    """A minimal stack (project acme-ml-dev, us-central1, buckets d/c/s/m, no network, no
    TensorBoard, no secrets) with `changes` applied and validated, e.g.
    `stack_outputs(project="p", vertex_endpoint=url)`."""
    from jobs.core.stack import StackOutputs

    document: dict[str, object] = {
        "project": "acme-ml-dev",
        "project_number": "123",
        "region": "us-central1",
        "environment": "dev",
        "trainer_service_account": "t@acme-ml-dev.iam.gserviceaccount.com",
        "launcher_service_account": "l@acme-ml-dev.iam.gserviceaccount.com",
        "buckets": {"data": "d", "checkpoints": "c", "staging": "s", "models": "m"},
        "artifact_registry": "us-central1-docker.pkg.dev/acme-ml-dev/vtx",
    }
    return StackOutputs.model_validate(document | changes)


def dev_stack(**changes: object) -> StackOutputs:
    """The full dev stack of `STACK_DEV_JSON` (attachment, TensorBoard, a secret, labels) with
    `changes` applied and validated."""
    from jobs.core.stack import StackOutputs, load_stack_file

    stack = load_stack_file(STACK_DEV_JSON)
    return StackOutputs.model_validate(stack.model_dump() | changes) if changes else stack


@pytest.fixture
def stack() -> StackOutputs:
    """`dev_stack()`; a module that needs another shape defines its own `stack` fixture."""
    return dev_stack()


@pytest.fixture(scope="session", autouse=True)
def _session_tempdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`tempfile` in the test process writes under this session's (this xdist worker's) own
    basetemp, not the shared /tmp: the trainer's cache of gs:// models (/tmp/vtx-models, keyed
    by URI) and any other temporary file stay apart across workers and runs, and are cleaned
    with the basetemp."""
    previous = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    try:
        yield
    finally:
        tempfile.tempdir = previous


@pytest.fixture(scope="session", autouse=True)
def _no_refreshed_prices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The catalog loader reads refreshed price tables from the user's prices folder: the tests
    read an empty one of their own (a test that refreshes sets its own), never the user's."""
    previous = os.environ.get("VTX_PRICES_DIR")
    os.environ["VTX_PRICES_DIR"] = str(tmp_path_factory.mktemp("vtx-prices"))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("VTX_PRICES_DIR", None)
        else:
            os.environ["VTX_PRICES_DIR"] = previous


def wait_for_port(port: int, timeout_s: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing answered on 127.0.0.1:{port} after {timeout_s} s")


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start the local platform's GCS emulator (jobs/local/storage/gcs_emulator.py), keeping
    nothing after it stops, for the session; yield its URL.

    Sets STORAGE_EMULATOR_HOST so google-cloud-storage and gcsfs talk to it."""
    port = free_port()
    workdir: Path = tmp_path_factory.mktemp("gcs-emulator")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.local.storage.gcs_emulator",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "-q",
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        wait_for_port(port)
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous


@pytest.fixture
def gcs_bucket(gcs_emulator: str) -> str:
    """A fresh, empty bucket in the emulator; returns its name."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="vtx-test", credentials=AnonymousCredentials())
    name = f"vtx-test-{uuid.uuid4().hex[:16]}"  # the trainer caches a gs:// prefix by its URI
    client.create_bucket(name)
    return name


@pytest.fixture(scope="session")
def local_platform_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformState]:
    """The local platform for the session, as `vtx local up` starts it (its own GCS emulator,
    with the buckets, and the control plane) on free ports with a tmp data dir. Sets
    VTX_LOCAL_DIR so that `--stack local` / `local_stack_outputs()` find it. Its emulator is
    not the `gcs_emulator` fixture's: talk to it through `gcs_endpoint`. A 5 s grace period
    keeps stop paths quick (Vertex's is 30 s)."""
    from jobs.local.platform.settings import LocalSettings
    from jobs.local.plumbing.processes import start_fresh, stop_platform
    from jobs.local.plumbing.tls import tls_files

    data_dir = tmp_path_factory.mktemp("vtx-local")
    repo = Path(__file__).resolve().parent.parent
    settings = LocalSettings(
        data_dir=data_dir,
        cwd=repo,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=5.0,
        max_replicas=8,
    )
    state = start_fresh(settings)
    # gRPC reads its default roots once per process: the session platform's CA, set before
    # any test opens a secure channel (as `eval "$(vtx local env)"` sets it for a shell).
    variables = {
        "VTX_LOCAL_DIR": str(data_dir),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls_files(data_dir).ca),
    }
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield state
    finally:
        stop_platform(data_dir)
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def local_platform(local_platform_state: PlatformState) -> StackOutputs:
    """StackOutputs of the running local platform: `vertex_endpoint`, `gcs_endpoint`, buckets
    (vtx-local-data, -checkpoints, -staging, -models), project vtx-local, us-central1."""
    from jobs.local.platform.state import stack_outputs_for

    return stack_outputs_for(local_platform_state)
