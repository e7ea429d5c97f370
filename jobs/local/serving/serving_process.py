"""One deployed model's serving container, run as a local process with Vertex's serving
environment (Google's "Custom container requirements for inference"; docs/vertex-facts.md,
"Serving containers" and "Endpoints").

What the process gets:
- its argv: the Model's ``containerSpec.command`` + ``args`` (``$(VAR)`` expanded from its
  environment, as Vertex does), else for vtx's own serving image (``.../serve:TAG``, whose
  ENTRYPOINT is ``python -m trainer.serve``) that command; ``python`` is this interpreter;
- ``AIP_HTTP_PORT``: a free port of 127.0.0.1, not ``containerSpec.ports[0]``: several deployed
  models share this machine, so the port a container declares is told, not given;
- ``AIP_HEALTH_ROUTE`` / ``AIP_PREDICT_ROUTE``: the Model's routes, else Vertex's defaults
  ``/v1/endpoints/ENDPOINT/deployedModels/DEPLOYED_MODEL`` (``:predict`` for prediction);
- ``AIP_STORAGE_URI``: the Model's ``artifactUri`` itself (Vertex copies it to a bucket of its
  own first); the GCS emulator serves it through ``STORAGE_EMULATOR_HOST``, as replicas get it;
- the other ``AIP_*`` variables Vertex sets (mode, ids, project number, machine), then the
  Model's ``containerSpec.env``.

Its stdout and stderr go to one log file (``DATA_DIR/endpoints/ENDPOINT/DEPLOYED_MODEL.log``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx

from jobs.local.platform.vertex_env import PYTHON_NAMES, VERTEX_VARS
from jobs.serving.model_facts import SERVING_IMAGE

VTX_SERVE_COMMAND = ("python", "-m", "trainer.serve")
"""The ENTRYPOINT of vtx's serving image (trainer/serve.Dockerfile)."""
HEALTH_TIMEOUT_S = 2.0
LOG_TAIL_LINES = 20
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class ServingCommandError(ValueError):
    """A Model whose container cannot be run here; the message says why."""


SERVE_HOST_ENV = "VTX_SERVE_HOST"
"""Where vtx's serving entry point listens (a copy of trainer.serving.env.HOST_ENV: the platform
never imports the trainer; tests/contracts pins the two)."""


def is_vtx_serving_image(image_uri: str) -> bool:
    """``REGISTRY/serve:TAG`` (or ``@DIGEST``): the image `vtx model upload` names by default."""
    name = image_uri.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return name == SERVING_IMAGE


def expand(value: str, env: dict[str, str]) -> str:
    """``$(VAR)`` -> its value when VAR is in ``env`` (left as written otherwise); ``$$`` -> ``$``,
    as ModelContainerSpec.command documents."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR_REF.sub(replace, value)


def serving_argv(container: dict, env: dict[str, str]) -> list[str]:
    """The argv of a Model's container (REST ``containerSpec``)."""
    command = list(container.get("command", []))
    if not command:
        if not is_vtx_serving_image(str(container.get("imageUri", ""))):
            raise ServingCommandError(
                f"model.containerSpec.command: required locally for image "
                f"{container.get('imageUri')!r}: there is no image to supply an ENTRYPOINT "
                f"(only vtx's own serving image, .../{SERVING_IMAGE}:TAG, is known: "
                f"{' '.join(VTX_SERVE_COMMAND)})"
            )
        command = list(VTX_SERVE_COMMAND)
    argv = [expand(a, env) for a in [*command, *container.get("args", [])]]
    if argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    return argv


@dataclass(frozen=True)
class Routes:
    health: str
    predict: str


def routes_of(container: dict, endpoint_id: str, deployed_model_id: str) -> Routes:
    """The Model's routes, else Vertex's defaults for this deployed model."""
    default = f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_model_id}"
    return Routes(
        health=container.get("healthRoute") or default,
        predict=container.get("predictRoute") or f"{default}:predict",
    )


def serving_env(
    model: dict,
    *,
    endpoint_id: str,
    deployed_model_id: str,
    project_number: str,
    port: int,
    machine_spec: dict,
    gcs_endpoint: str,
    base_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a deployed model's process: the local one without Vertex's or any
    ``AIP_`` variables, then what Vertex sets, then the Model's ``containerSpec.env``."""
    base = base_env if base_env is not None else dict(os.environ)
    env = {k: v for k, v in base.items() if k not in VERTEX_VARS and not k.startswith("AIP_")}
    env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
    container = model.get("containerSpec", {})
    routes = routes_of(container, endpoint_id, deployed_model_id)
    model_id = model["name"].rsplit("/", 1)[-1]
    env.update(
        AIP_HTTP_PORT=str(port),
        AIP_HEALTH_ROUTE=routes.health,
        AIP_PREDICT_ROUTE=routes.predict,
        AIP_MODE="PREDICTION",
        AIP_MODE_VERSION="1.0.0",
        AIP_FRAMEWORK="CUSTOM_CONTAINER",
        AIP_DEPLOYED_MODEL_ID=deployed_model_id,
        AIP_ENDPOINT_ID=endpoint_id,
        AIP_PROJECT_NUMBER=project_number,
        AIP_MODEL_NAME=model_id,
        AIP_VERSION_NAME=str(model.get("versionId", "")),
        AIP_MACHINE_TYPE=str(machine_spec.get("machineType", "")),
    )
    if machine_spec.get("acceleratorType"):
        env["AIP_ACCELERATOR_TYPE"] = str(machine_spec["acceleratorType"])
    if model.get("artifactUri"):
        env["AIP_STORAGE_URI"] = str(model["artifactUri"])
    env["STORAGE_EMULATOR_HOST"] = gcs_endpoint
    # gcsfs otherwise probes every bucket over gRPC, which the emulator cannot answer.
    env["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach the log file as they are printed
    for item in container.get("env", []):
        env[item["name"]] = expand(item.get("value", ""), env)
    # After the Model's own env, so no Model can widen it: vtx's serving entry point listens on
    # every interface on Vertex, on 127.0.0.1 here (local clients only).
    env[SERVE_HOST_ENV] = "127.0.0.1"
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines of a log file (none if it does not exist)."""
    try:
        with path.open(errors="replace") as handle:
            return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]
    except OSError:
        return []


def pid_runs(pid: int | None, argv: list[str]) -> bool:
    """Whether ``pid`` is alive and still runs ``argv`` (not a reused pid)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the pid
    return cmdline.split(b"\0")[: len(argv)] == [a.encode() for a in argv]


class ServingProcess:
    """A serving process this control plane started (or found running after a crash)."""

    def __init__(
        self, pid: int, port: int, routes: Routes, log_path: Path, proc: subprocess.Popen | None
    ) -> None:
        self.pid, self.port, self.routes, self.log_path = pid, port, routes, log_path
        self._proc = proc

    @classmethod
    def start(
        cls,
        argv: list[str],
        env: dict[str, str],
        port: int,
        routes: Routes,
        log_path: Path,
        cwd: Path,
    ) -> ServingProcess:
        """Start it in its own session (signals reach its children), output to ``log_path``."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(proc.pid, port, routes, log_path, proc)

    def exit_code(self) -> int | None:
        """The exit status once it ended (negative: the signal), else None."""
        if self._proc is not None:
            return self._proc.poll()
        try:
            os.kill(self.pid, 0)
        except OSError:
            return -1  # not our child: its status is unknown
        return None

    def healthy(self) -> bool:
        """GET the health route: 200 means the model is loaded (Vertex's readiness)."""
        url = f"http://127.0.0.1:{self.port}{self.routes.health}"
        try:
            with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    async def predict(self, client: httpx.AsyncClient, body: bytes) -> tuple[int, bytes]:
        """POST the prediction body to the predict route: (status, body). Raises httpx's
        TransportError when nothing answers; the caller sets the deadline."""
        response = await client.post(
            f"http://127.0.0.1:{self.port}{self.routes.predict}",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        return response.status_code, response.content

    def stop(self, grace_s: float) -> None:
        """SIGTERM its session, then SIGKILL after ``grace_s`` (Vertex gives a container 30 s)."""
        if self.exit_code() is not None:
            return
        _signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.exit_code() is None:
            time.sleep(0.05)
        if self.exit_code() is None:
            _signal_group(self.pid, signal.SIGKILL)
            if self._proc is not None:
                self._proc.wait(timeout=10)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
