"""The local platform's settings, declared once: defaults, bounds and help live here.

`vtx local up` builds a ``LocalSettings`` from its options (whose defaults, bounds and help are
read from these fields), the platform hands it whole to the control-plane process as one JSON
argument, and the server hands it whole to the executor. The token is not a setting: it travels
by environment only (``VTX_LOCAL_TOKEN``), since any user of the machine can read a command line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobs.local.platform.capacity import Capacity

DEFAULT_DIR = Path(".vtx") / "local"
DATA_DIR_ENV = "VTX_LOCAL_DIR"
READ_TIMEOUT_S = 60.0
"""Longest wait for the next bytes of a request (or, on a kept-alive connection, for the next
request) before the connection is closed (jobs/local/plumbing/request_deadline.py)."""


def default_data_dir() -> Path:
    """``$VTX_LOCAL_DIR`` if set, else ``.vtx/local`` under the current directory."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else DEFAULT_DIR


class LocalSettings(BaseModel):
    """How one local platform runs: where, on which ports, and the executor's knobs."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where jobs, logs, objects and the state file live (0700)."""
    cwd: Path = Field(default_factory=Path.cwd)
    """The directory replicas run in: where `vtx local up` was started (the checkout)."""
    port: int = Field(8470, ge=1, le=65535, description="Control plane port on 127.0.0.1.")
    gcs_port: int = Field(8471, ge=1, le=65535, description="GCS emulator port on 127.0.0.1.")
    grpc_port: int = Field(
        0, ge=0, le=65535, description="gRPC (TLS) port on 127.0.0.1; 0: a free one."
    )
    """Vertex's API over gRPC, for the SDK's default transport; `vtx local env` says where."""
    max_replicas: int = Field(8, ge=1, description="Replicas that may run at once.")
    """A job needing more is refused at once (429); others wait QUEUED, first in first out."""
    grace_s: float = Field(
        30.0, ge=0, le=3600, description="SIGTERM-to-SIGKILL delay (a Spot VM gets 30 s)."
    )
    """Applied on cancel, timeout, preemption and `vtx local down`."""
    chaos_per_hour: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="Random preemptions per replica-hour for Spot jobs (label vtx-chaos-per-hour).",
    )
    """0: none. Drawn once per job at submission, so a seed replays the same preemptions."""
    chaos_seed: int = Field(0, description="Seed of the chaos schedule (label vtx-chaos-seed).")
    read_timeout_s: float = Field(
        READ_TIMEOUT_S,
        gt=0,
        le=3600,
        description="Longest wait for a client's next bytes before its connection is closed.",
    )
    """Both servers' deadline on a half-sent request (jobs/local/plumbing/request_deadline.py)."""
    capacity: Capacity = Field(default_factory=Capacity)
    """Accelerators and quota limits per region (`vtx local up --capacity FILE.yaml`); empty:
    unlimited. `vtx local capacity set` replaces it at run time."""

    @property
    def vertex_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gcs_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.gcs_port}"

    def replace(self, **changes: Any) -> LocalSettings:
        """A copy with ``changes``, validated like the original."""
        return LocalSettings.model_validate(self.model_dump() | changes)


def option_spec(field: str) -> dict[str, Any]:
    """A field's default, bounds and help as CLI option keywords (``default``, ``min``,
    ``max``, ``help``): `vtx local up` declares none of them again."""
    info = LocalSettings.model_fields[field]
    spec: dict[str, Any] = {"default": info.default, "help": info.description}
    for item in info.metadata:
        if getattr(item, "ge", None) is not None:
            spec["min"] = item.ge
        if getattr(item, "le", None) is not None:
            spec["max"] = item.le
    return spec
