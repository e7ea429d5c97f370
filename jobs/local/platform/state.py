"""Where the local platform lives on disk and what it looks like to jobs.

`vtx local up` writes ``state.json`` into the data directory (ports, pids, the working directory
replicas run in); every other command reads it back. ``local_stack_outputs()`` turns it into the
same StackOutputs a Pulumi stack exports, so `--stack local` needs no special case downstream.
Whether what it records still runs (``running_state``) is answered here too, from the pids and
their create times. This module stays cheap to import: `vtx --help` loads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobs.core.catalog import load_catalog
from jobs.core.stack import Buckets, RegionOutputs, StackError, StackOutputs
from jobs.local.platform.settings import DATA_DIR_ENV, default_data_dir

# The local stack's fixed identity. The project number is what Vertex puts into resource names
# and CLOUD_ML_PROJECT_ID; any 12-digit number does, this one is easy to recognise in logs.
LOCAL_PROJECT = "vtx-local"
LOCAL_PROJECT_NUMBER = "424242424242"
LOCAL_REGION = "us-central1"
PROJECT_ID_PATTERN = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
"""Google's project id rule: 6 to 30 lowercase letters, digits or hyphens, starting with a
letter and not ending with a hyphen."""
PROJECT_NUMBER_PATTERN = re.compile(r"[1-9][0-9]{0,17}")
# Constructed, not validated: fixed names, and validating at import built the model's validator
# for every command of the CLI.
LOCAL_BUCKETS = Buckets.model_construct(
    data="vtx-local-data",
    checkpoints="vtx-local-checkpoints",
    staging="vtx-local-staging",
    models="vtx-local-models",
)
EXAMPLE_DATA = {
    Path(__file__).resolve().parents[3] / "trainer" / "examples" / "data" / "tiny.jsonl": (
        LOCAL_BUCKETS.data,
        "examples/tiny.jsonl",
    ),
}
"""What `vtx local up` puts into the data bucket: the data the shipped templates read."""
STATE_FILE = "state.json"
TOKEN_ENV = "VTX_LOCAL_TOKEN"
"""How `vtx local up` hands the token to the control plane (its command line is public)."""
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
PRIVATE_UMASK = 0o077
"""The data dir holds jobs, logs, checkpoints and the token: the user's alone."""


class PlatformState(BaseModel):
    """What `vtx local up` started, persisted so later commands can find and stop it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    data_dir: str
    cwd: str
    """Directory replicas run in: where `vtx local up` was started (the checkout)."""
    vertex_port: int
    gcs_port: int
    server_pid: int
    server_create_time: float
    """psutil create time, to tell our process from a later one that reused the pid."""
    grpc_port: int | None = None
    """Vertex's API over gRPC (TLS); None in a state written before the platform served it."""
    gcs_pid: int | None = None
    """None when the platform reuses an emulator it did not start (tests)."""
    gcs_create_time: float | None = None
    controller_pid: int | None = None
    """The controller (`python -m jobs.control`) beside the control plane; None: not started."""
    controller_create_time: float | None = None
    token: str = Field(repr=False)
    """Wanted by the vtx-only endpoints (logs, preemption); see jobs/local/plumbing/guard.py."""

    @property
    def vertex_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.vertex_port}"

    @property
    def gcs_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.gcs_port}"

    @property
    def grpc_endpoint(self) -> str | None:
        """``aiplatform.init(api_endpoint=...)`` for the SDK's default (gRPC) transport."""
        return f"127.0.0.1:{self.grpc_port}" if self.grpc_port else None


def project_number(project: str) -> str | None:
    """The project number the platform answers with for a project id (or number), None when
    ``project`` is neither.

    Any project id is served, so a user's own ``aiplatform.init(project="acme-ml-dev")`` runs
    unchanged. Vertex puts the number, not the id, into resource names and
    ``CLOUD_ML_PROJECT_ID``; here it is derived from the id (12 digits of its SHA-256, never
    starting with 0), so it is the same for that id on every machine and across restarts.
    ``vtx-local`` keeps its fixed, recognisable number. A number passed in place of an id is
    its own project, as on Vertex, where both name the same project.
    """
    if project == LOCAL_PROJECT:
        return LOCAL_PROJECT_NUMBER
    if PROJECT_NUMBER_PATTERN.fullmatch(project):
        return project
    if not PROJECT_ID_PATTERN.fullmatch(project):
        return None
    digest = int.from_bytes(hashlib.sha256(project.encode()).digest()[:8], "big")
    return str(10**11 + digest % (9 * 10**11))


def numbered_name(name: str) -> str:
    """``name`` with its project written as the project's number, as the platform names
    resources (``projects/acme-ml-dev/locations/L/models/M`` -> ``projects/NUMBER/...``): a
    resource a request names in its body (a ``parentModel``, a deployed ``model``) is the same
    whichever the client wrote, as the routes' own paths are. A name that does not start with a
    project the platform serves is returned as it is."""
    head, sep, rest = name.removeprefix("projects/").partition("/")
    number = project_number(head) if name.startswith("projects/") else None
    return f"projects/{number}{sep}{rest}" if number is not None else name


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def read_state(data_dir: Path) -> PlatformState | None:
    """The recorded state, or None when no platform was started from this data dir."""
    path = state_path(data_dir)
    try:
        return PlatformState.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (ValidationError, json.JSONDecodeError) as exc:
        raise StackError(
            f"{path} is not a vtx local state file ({exc.__class__.__name__}); "
            f"stop any leftover processes and delete it"
        ) from exc


def write_state(state: PlatformState) -> None:
    """Atomically, and readable by the user only: it holds the token."""
    path = state_path(Path(state.data_dir))
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w") as out:
        out.write(state.model_dump_json(indent=2))
    tmp.replace(path)


def process_alive(pid: int | None, create_time: float | None) -> bool:
    """Whether ``pid`` runs and is the process started at ``create_time`` (psutil's), not a
    later one that reused the pid."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 0.5
    except psutil.NoSuchProcess:
        return False


def server_alive(state: PlatformState) -> bool:
    return process_alive(state.server_pid, state.server_create_time)


def gcs_alive(state: PlatformState) -> bool:
    # An emulator we did not start (gcs_pid None) is someone else's to keep alive.
    return state.gcs_pid is None or process_alive(state.gcs_pid, state.gcs_create_time)


def controller_alive(state: PlatformState) -> bool:
    return process_alive(state.controller_pid, state.controller_create_time)


def running_state(data_dir: Path) -> PlatformState | None:
    """The state of a platform whose processes are all alive, else None."""
    state = read_state(data_dir)
    if state is None or not (server_alive(state) and gcs_alive(state)):
        return None
    return state


def stack_outputs_for(state: PlatformState) -> StackOutputs:
    return StackOutputs(
        project=LOCAL_PROJECT,
        project_number=LOCAL_PROJECT_NUMBER,
        region=LOCAL_REGION,
        environment="local",
        trainer_service_account=f"vtx-trainer@{LOCAL_PROJECT}.iam.gserviceaccount.com",
        launcher_service_account=f"vtx-launcher@{LOCAL_PROJECT}.iam.gserviceaccount.com",
        serving_service_account=f"vtx-serving@{LOCAL_PROJECT}.iam.gserviceaccount.com",
        buckets=LOCAL_BUCKETS,
        artifact_registry=f"local-docker.pkg.dev/{LOCAL_PROJECT}/vtx",
        # The platform serves every catalog region (each with its own jobs and capacity), so a
        # capacity ladder's region rungs run here as against a stack given them all.
        regions={r: RegionOutputs() for r in load_catalog().regions if r != LOCAL_REGION},
        controller=True,  # `vtx local up` starts one beside the control plane
        vertex_endpoint=state.vertex_endpoint,
        gcs_endpoint=state.gcs_endpoint,
        local_token=state.token,
    )


def local_stack_outputs(data_dir: Path | None = None) -> StackOutputs:
    """StackOutputs of the running local platform; StackError when it is not up."""
    directory = data_dir or default_data_dir()
    state = running_state(directory)
    if state is None:
        raise StackError(
            f"the local platform is not running (no live platform in {directory}): "
            f"run `vtx local up` first"
            + ("" if os.environ.get(DATA_DIR_ENV) else ", or set VTX_LOCAL_DIR to its data dir")
        )
    return stack_outputs_for(state)
