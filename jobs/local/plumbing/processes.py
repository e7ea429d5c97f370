"""Start, inspect, recover and stop the local platform's background processes.

The GCS emulator (`python -m jobs.local.storage.gcs_emulator`), the control plane (`python -m
jobs.local.api.server`) and the controller beside them (`python -m jobs.control`: what vtx adds over
Vertex, a ladder's walk and the budgets, a pass every few seconds) each run in their own session so
that closing the terminal does not kill them, and so that replicas (in sessions of their own)
survive a control-plane crash and can be re-attached: `vtx local up` after a crash starts only what
is gone, on the ports recorded, and leaves what survived (the emulator the replicas write to, the
replicas) alone; after both died it starts both there again (a recorded port another program took
since is replaced, and said); a controller that stopped is started again by `up` whatever else runs.
All run with umask 077 in a 0700 data dir: jobs, logs, objects and the token are the user's alone.
`vtx local down` stops the replicas the store records that still run itself once no control plane is
left to (both processes died, or it was killed for not stopping in time). Used by `vtx local
up|down|status`, `vtx demo` and the test fixture. Everything about how to run comes as one
``LocalSettings`` (jobs/local/platform/settings.py), handed whole to the control plane.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from jobs.core.states import JobState
from jobs.local.platform.settings import READ_TIMEOUT_S, LocalSettings
from jobs.local.platform.state import (
    EXAMPLE_DATA,
    LOCAL_BUCKETS,
    LOCAL_PROJECT,
    LOCAL_PROJECT_NUMBER,
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    PRIVATE_UMASK,
    TOKEN_ENV,
    PlatformState,
    controller_alive,
    gcs_alive,
    process_alive,
    read_state,
    server_alive,
    stack_outputs_for,
    state_path,
    write_state,
)
from jobs.local.platform.store import STORE_FILE, Store
from jobs.local.plumbing.ports import free_port, port_free
from jobs.local.plumbing.tls import ensure_certificates

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
"""How long a server that is still alive may take to answer its first request: a crash is
reported at once (its exit is watched), so this only catches a hang, never a slow cold start
on a busy machine (imports alone take seconds on two loaded cores)."""
# The control plane stops running replicas on shutdown (SIGTERM, grace, SIGKILL): wait for that.
SHUTDOWN_TIMEOUT_S = 60.0
CONTROLLER_INTERVAL_S = 2.0
"""Seconds between the local controller's passes: a budget is enforced within two of them."""
REPLICA_STOP_S = 10.0
"""How long the replicas `down` stops itself get between SIGTERM and SIGKILL."""


class PlatformError(Exception):
    """Something the user can fix about starting or stopping the local platform."""


class NotRunning(PlatformError):
    """There is no platform to stop: what `vtx local down` was asked for is already true."""


def _check_port(port: int, option: str) -> None:
    if not port_free(port):
        raise PlatformError(
            f"port {port} on 127.0.0.1 is already in use by another program; "
            f"pick another one with {option} N (or stop that program)"
        )


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


def _wait_until_answers(url: str, proc: subprocess.Popen[bytes], name: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PlatformError(
                f"the {name} exited during start-up (code {proc.returncode}); "
                f"last lines of {log_path}:\n{_tail(log_path)}"
            )
        if _http_ok(url):
            return
        time.sleep(0.1)
    raise PlatformError(f"the {name} did not answer on {url} within {STARTUP_TIMEOUT_S:.0f} s")


def private_dir(path: Path) -> Path:
    """Create (or tighten) a directory only the user may enter."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    path.chmod(PRIVATE_DIR_MODE)
    return path


def _spawn(
    cmd: list[str], log_path: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A background process in a session of its own, writing private files (umask 077)."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "ab") as out:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=PRIVATE_UMASK,
        )


def _gcs_post(
    url: str, data: bytes, content_type: str, what: str, ok: tuple[int, ...] = ()
) -> None:
    """One plain JSON-API call: the emulator speaks exactly this, and it spares `vtx local up`
    the import of google-cloud-storage. HTTP codes in ``ok`` count as success."""
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as exc:
        if exc.code not in ok:
            raise PlatformError(f"could not {what}: HTTP {exc.code}") from exc
    except OSError as exc:
        raise PlatformError(f"could not {what}: {exc}") from exc


def create_buckets(gcs_endpoint: str) -> None:
    """Create the local stack's buckets (idempotent: 409 means it exists, after a restart)."""
    for name in LOCAL_BUCKETS.model_dump().values():
        _gcs_post(
            f"{gcs_endpoint}/storage/v1/b?project={LOCAL_PROJECT}",
            json.dumps({"name": name}).encode(),
            "application/json",
            f"create bucket {name} at {gcs_endpoint}",
            ok=(409,),
        )


def upload_examples(gcs_endpoint: str) -> None:
    """Put the example data the shipped templates read (smoke-cpu's gs://vtx-local-data/
    examples/tiny.jsonl) into the data bucket, as a stack's data bucket would hold a team's
    data. Overwriting is harmless."""
    for local, (bucket, name) in EXAMPLE_DATA.items():
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        _gcs_post(
            f"{gcs_endpoint}/upload/storage/v1/b/{bucket}/o?{query}",
            local.read_bytes(),
            "application/octet-stream",
            f"upload {local} to gs://{bucket}/{name}",
        )


def gcs_command(port: int, read_timeout_s: float = READ_TIMEOUT_S) -> list[str]:
    """The GCS emulator's command line (jobs/local/storage/gcs_emulator.py) on ``port``; it keeps
    objects under ./.cloudstorage/v2 of its working directory."""
    cmd = [sys.executable, "-m", "jobs.local.storage.gcs_emulator"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--read-timeout-s", str(read_timeout_s)]
    return [*cmd, "--project-number", LOCAL_PROJECT_NUMBER, "-q"]


def _start_gcs(data_dir: Path, settings: LocalSettings, port: int) -> subprocess.Popen[bytes]:
    command = gcs_command(port, settings.read_timeout_s)
    return _spawn(command, data_dir / "gcs.log", private_dir(data_dir / "gcs"))


def _start_server(settings: LocalSettings, token: str) -> subprocess.Popen[bytes]:
    """The control plane, given its settings whole as one JSON argument (`--settings`) and the
    token in its environment only."""
    cmd = [sys.executable, "-m", "jobs.local.api.server", "--settings", settings.model_dump_json()]
    env = dict(os.environ)
    env[TOKEN_ENV] = token
    # Replicas need the checkout importable even when vtx is not installed in editable mode.
    cwd = str(settings.cwd)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [cwd, env.get("PYTHONPATH")]))
    return _spawn(cmd, settings.data_dir / "server.log", settings.cwd, env)


def _start_controller(state: PlatformState) -> PlatformState:
    """The controller beside the control plane, given the stack it watches (without the
    platform's token, which it does not need); the state that records it."""
    stack = stack_outputs_for(state).model_copy(update={"local_token": None})
    cmd = [sys.executable, "-m", "jobs.control", "--stack-json", stack.model_dump_json()]
    cmd += ["--interval", str(CONTROLLER_INTERVAL_S)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [state.cwd, env.get("PYTHONPATH")]))
    proc = _spawn(cmd, Path(state.data_dir) / "controller.log", Path(state.cwd), env)
    return state.model_copy(
        update={
            "controller_pid": proc.pid,
            "controller_create_time": psutil.Process(proc.pid).create_time(),
        }
    )


def clear_stale(data_dir: Path) -> str | None:
    """Remove a state file none of whose processes runs; say so, or None if nothing was done.
    A platform that is partly alive is not stale: `bring_up` recovers it."""
    state = read_state(data_dir)
    if state is None or server_alive(state) or gcs_alive(state):
        return None
    state_path(data_dir).unlink(missing_ok=True)
    return (
        f"found a stale state file in {data_dir} (a platform that is no longer running); removed it"
    )


def start_fresh(
    settings: LocalSettings, gcs_endpoint: str | None = None, token: str | None = None
) -> PlatformState:
    """Start the emulator (unless ``gcs_endpoint`` names one already running) and the control
    plane, create the buckets with the example data, record the state, and return once both
    answer. ``token``: the platform's, when it comes back after a crash; else a new one."""
    data_dir = private_dir(settings.data_dir.resolve())
    if read_state(data_dir) is not None:
        raise PlatformError(
            f"the local platform is already running from {data_dir}, or was and crashed; "
            f"`vtx local up` recovers it, `vtx local down` stops it"
        )
    _check_port(settings.port, "--port")
    gcs_proc = None
    if gcs_endpoint is None:
        if settings.gcs_port == settings.port:
            # The emulator would take the port and answer the control plane's health check.
            raise PlatformError(
                f"--port and --gcs-port are both {settings.port}: the control plane and the GCS "
                f"emulator need a port each"
            )
        _check_port(settings.gcs_port, "--gcs-port")
        gcs_proc = _start_gcs(data_dir, settings, settings.gcs_port)
        gcs_port = settings.gcs_port
    else:
        gcs_port = int(gcs_endpoint.rsplit(":", 1)[1])
    grpc_port = settings.grpc_port or free_port()
    if grpc_port in (settings.port, gcs_port):
        raise PlatformError(
            f"--grpc-port {grpc_port} is the port of the control plane or the GCS emulator: "
            f"the gRPC endpoint needs a port of its own"
        )
    _check_port(grpc_port, "--grpc-port")
    ensure_certificates(data_dir)  # the gRPC endpoint's CA and certificate (plumbing/tls.py)
    settings = settings.replace(data_dir=data_dir, gcs_port=gcs_port, grpc_port=grpc_port)
    token = token or secrets.token_urlsafe(32)
    server = None
    try:
        if gcs_proc is not None:
            _wait_for_gcs(settings.gcs_endpoint, gcs_proc, data_dir)
        create_buckets(settings.gcs_endpoint)
        upload_examples(settings.gcs_endpoint)
        server = _start_server(settings, token)
        _wait_for_server(settings.port, server, data_dir)
    except BaseException:
        for proc in (server, gcs_proc):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        raise
    state = PlatformState(
        data_dir=str(data_dir),
        cwd=str(settings.cwd.resolve()),
        vertex_port=settings.port,
        gcs_port=gcs_port,
        grpc_port=grpc_port,
        server_pid=server.pid,
        server_create_time=psutil.Process(server.pid).create_time(),
        gcs_pid=gcs_proc.pid if gcs_proc else None,
        gcs_create_time=psutil.Process(gcs_proc.pid).create_time() if gcs_proc else None,
        token=token,
    )
    write_state(state)  # recorded first: a controller that fails to start leaves a platform up
    state = _start_controller(state)
    write_state(state)
    return state


def _wait_for_gcs(gcs_endpoint: str, proc: subprocess.Popen[bytes], data_dir: Path) -> None:
    url = f"{gcs_endpoint}/storage/v1/b?project={LOCAL_PROJECT}"
    _wait_until_answers(url, proc, "GCS emulator", data_dir / "gcs.log")


def _wait_for_server(port: int, proc: subprocess.Popen[bytes], data_dir: Path) -> None:
    url = f"http://127.0.0.1:{port}/vtx/health"
    _wait_until_answers(url, proc, "control plane", data_dir / "server.log")


@dataclass(frozen=True)
class Started:
    """What `bring_up` did: the running platform, and a note when it was not a fresh start."""

    state: PlatformState
    note: str | None = None


def bring_up(settings: LocalSettings) -> Started:
    """`vtx local up`: start the platform, or bring back the part of it that died.

    After a crash of the control plane the emulator and the replicas live on: only the control
    plane is started again (on its recorded port, with the same token), and it re-attaches to
    the running jobs. A dead emulator is started again on its port over the same objects."""
    data_dir = private_dir(settings.data_dir.resolve())
    state = read_state(data_dir)
    if state is not None:
        server_up, gcs_up = server_alive(state), gcs_alive(state)
        if server_up and gcs_up and not controller_alive(state):
            state = _start_controller(state)
            write_state(state)
            return Started(state, "the controller had stopped; started it again")
        if server_up and gcs_up:
            raise PlatformError(
                f"the local platform is already running from {data_dir}; "
                f"see `vtx local status`, or stop it with `vtx local down`"
            )
        if server_up or gcs_up:
            return _recover(state, settings, server_up)
        return _restart(state, settings)
    return Started(start_fresh(settings.replace(data_dir=data_dir)))


def recorded_port(port: int, what: str) -> tuple[int, str | None]:
    """The port ``what`` ran on, or a free one (and why) when another program took it since."""
    if port_free(port):
        return port, None
    chosen = free_port()
    return chosen, f"the {what}'s port {port} is taken by another program now: using {chosen}"


def _restart(state: PlatformState, settings: LocalSettings) -> Started:
    """Both processes died (kill -9, an out-of-memory kill): start them again where they ran,
    on their recorded ports and with the platform's token, so that replicas which outlived them
    still reach their storage and the control plane re-attaches to them (replicas that died
    with them are restarted, as Vertex restarts a lost worker). ``settings`` gives the
    executor's knobs."""
    data_dir = Path(state.data_dir)
    vertex_port, vertex_note = recorded_port(state.vertex_port, "control plane")
    gcs_port, gcs_note = recorded_port(state.gcs_port, "GCS emulator")
    grpc_port, grpc_note = recorded_port(state.grpc_port or settings.grpc_port, "gRPC endpoint")
    if gcs_note:
        gcs_note += (
            f"; jobs still running were given http://127.0.0.1:{state.gcs_port} as their "
            f"storage and will fail to reach it: cancel and run them again"
        )
    settings = settings.replace(
        data_dir=data_dir,
        cwd=Path(state.cwd),
        port=vertex_port,
        gcs_port=gcs_port,
        grpc_port=grpc_port,
    )
    # The controller watched the platform that stopped, and start_fresh starts its own: left
    # running, the old one would outlive everything, recorded nowhere.
    _stop_controller(state)
    state_path(data_dir).unlink(missing_ok=True)  # start_fresh records the new pids
    started = start_fresh(settings, token=state.token)
    note = (
        f"the control plane and the GCS emulator had both stopped; started them again on "
        f":{vertex_port} and :{gcs_port} over the same jobs and objects, and re-attached the "
        f"running jobs" + "".join(f"; {n}" for n in (vertex_note, gcs_note, grpc_note) if n)
    )
    return Started(started, note)


def _recover(state: PlatformState, settings: LocalSettings, server_up: bool) -> Started:
    """Start again what stopped, where the state says it ran (data dir, directory, ports);
    ``settings`` gives the executor's knobs."""
    data_dir = Path(state.data_dir)
    settings = settings.replace(
        data_dir=data_dir,
        cwd=Path(state.cwd),
        port=state.vertex_port,
        gcs_port=state.gcs_port,
        grpc_port=state.grpc_port or settings.grpc_port or free_port(),
    )
    if server_up:  # the emulator died: same port, same objects on disk
        _check_port(state.gcs_port, "--gcs-port")
        gcs = _start_gcs(data_dir, settings, state.gcs_port)
        _wait_for_gcs(state.gcs_endpoint, gcs, data_dir)
        create_buckets(state.gcs_endpoint)
        state = state.model_copy(
            update={"gcs_pid": gcs.pid, "gcs_create_time": psutil.Process(gcs.pid).create_time()}
        )
        state = _with_controller(state)
        return Started(
            state, f"the GCS emulator had stopped; started it again on :{state.gcs_port}"
        )
    _check_port(state.vertex_port, "--port")
    _check_port(settings.grpc_port, "--grpc-port")
    ensure_certificates(data_dir)
    server = _start_server(settings, state.token)
    _wait_for_server(state.vertex_port, server, data_dir)
    state = state.model_copy(
        update={
            "grpc_port": settings.grpc_port,
            "server_pid": server.pid,
            "server_create_time": psutil.Process(server.pid).create_time(),
        }
    )
    state = _with_controller(state)
    return Started(
        state,
        f"the control plane had stopped; started it again on :{state.vertex_port} and it "
        f"re-attached to the running jobs (the GCS emulator and the replicas were left running)",
    )


def _with_controller(state: PlatformState) -> PlatformState:
    """The state recorded, with the controller started again when it had stopped too."""
    if not controller_alive(state):
        state = _start_controller(state)
    write_state(state)
    return state


def _stop_controller(state: PlatformState) -> None:
    """Stop the controller ``state`` records, if it still runs."""
    if controller_alive(state) and state.controller_pid is not None:
        _terminate(state.controller_pid)


def _terminate(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM, wait, then SIGKILL one process (ours, identified by the caller)."""
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    except psutil.NoSuchProcess:
        return


def _recorded_runners(data_dir: Path) -> list[psutil.Process]:
    """The runners of the active jobs' replicas, as the store records them, that still run:
    each leads its replica's process group."""
    path = data_dir / STORE_FILE
    if not path.exists():
        return []
    store = Store(path)
    try:
        jobs = store.active_jobs(tuple(s.value for s in JobState if not s.final))
    finally:
        store.close()
    runners = []
    for _resource, runtime in jobs:
        for replica in runtime.get("replicas", []):
            if process_alive(replica.get("pid"), replica.get("create_time")):
                try:
                    runners.append(psutil.Process(replica["pid"]))
                except psutil.NoSuchProcess:
                    continue
    return runners


def _signal_groups(runners: list[psutil.Process], sig: signal.Signals) -> None:
    for runner in runners:
        try:
            os.killpg(runner.pid, sig)
        except ProcessLookupError:
            continue


def stop_recorded_replicas(data_dir: Path, grace_s: float = REPLICA_STOP_S) -> int:
    """Stop the replicas the store records that still run, as the control plane would have
    (SIGTERM to each process group, SIGKILL after ``grace_s``): once it is gone nothing else
    would. Their jobs are settled by the control plane's next start. Returns how many."""
    runners = _recorded_runners(data_dir)
    _signal_groups(runners, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(runners, timeout=grace_s)
    _signal_groups(alive, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)
    return len(runners)


def stop_platform(data_dir: Path) -> PlatformState:
    """Stop a running platform (its control plane stops running replicas first). A control
    plane that crashed is brought back first, so that it stops the replicas it left; when the
    emulator died too, or the control plane had to be killed, the replicas still running are
    stopped here."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is not None:
        _stop_controller(state)  # first: it acts on the jobs the others stop
    # Both dead: their replicas are stopped here, as bringing both back to stop them would first
    # restart those that died with them.
    both_dead = state is not None and not (server_alive(state) or gcs_alive(state))
    if state is not None and both_dead and stop_recorded_replicas(data_dir):
        state_path(data_dir).unlink(missing_ok=True)
        return state
    stale = clear_stale(data_dir)
    state = read_state(data_dir)
    if state is None:
        detail = f" ({stale})" if stale else ""
        raise NotRunning(f"nothing to stop: no local platform is running from {data_dir}{detail}")
    if not server_alive(state):
        state = _recover(state, LocalSettings(), server_up=False).state
        _stop_controller(state)
    _terminate(state.server_pid, SHUTDOWN_TIMEOUT_S)
    if state.gcs_pid is not None:
        _terminate(state.gcs_pid)
    stop_recorded_replicas(data_dir)  # those a control plane killed for its slowness left
    state_path(data_dir).unlink(missing_ok=True)
    return state
