"""EndpointService v1 and PredictionService's ``:predict`` on the local platform: endpoints, the
models deployed to them as serving processes (jobs/local/serving/serving_process.py), traffic
splits (jobs/local/serving/traffic.py), and the long-running operations of create, deploy,
undeploy and delete.

Stored in REST form (camelCase, enum names) as Vertex returns them; each deployed model also
has a deployment record (its process: pid, port, routes, log file, state). What endpoint.proto
and endpoint_service.proto say, and this does:
- CreateEndpoint answers an operation under the new endpoint that is done from its first read
  (as an upload is, jobs/local/serving/models.py); DeleteEndpoint is refused while models are
  deployed.
- DeployModel starts the model's serving process and answers an operation that is done once
  the process answers its health route with 200 (``DeployModelResponse``), or failed when the
  process exits or is not healthy within ``deploy_timeout_s`` (the reason and its last log
  lines). Only then is the model listed in ``deployedModels`` and given its traffic.
- ``trafficSplit``: a DeployModel's, when given, replaces the endpoint's ("0" names the model
  being deployed); an UndeployModel's likewise; a model keeping traffic cannot be undeployed
  unless it is the last one. Percentages sum to 100.
- Predict picks a deployed model by the split, deterministically: smooth weighted round robin
  (``traffic.pick_deployed``), so every 100 predictions follow the split exactly, interleaved;
  the container's answer becomes Vertex's (jobs/local/serving/predictions.py).
The checks of a create and a deploy are pure, apart (jobs/local/serving/endpoint_checks.py).
A control plane that starts finds the deployed models of the store and starts their serving
processes again (a process left by a crash is stopped first); `vtx local down` stops them all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from jobs.core.formats import now_rfc3339
from jobs.local.platform.operations import EMPTY_TYPE
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import numbered_name
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.serving.endpoint_checks import (
    DEPLOYED_MODEL_ID,
    endpoint_problems,
    private_endpoints,
    psc_enabled,
    resources_problems,
    service_attachment,
)
from jobs.local.serving.model_filters import ENDPOINT_FIELDS, ModelFilterError, parse_model_filter
from jobs.local.serving.models import TYPE_PREFIX, ModelError, ModelRef, Models, invalid
from jobs.local.serving.predictions import (
    deadline_exceeded,
    inference_timeout_s,
    integral,
    prediction_response,
)
from jobs.local.serving.serving_process import (
    ServingCommandError,
    ServingProcess,
    log_tail,
    pid_runs,
    routes_of,
    serving_argv,
    serving_env,
)
from jobs.local.serving.traffic import pick_deployed, split_problems

log = logging.getLogger(__name__)

ENDPOINT_OUTPUT_ONLY = ("name", "deployedModels", "createTime", "updateTime", "etag")
DEPLOYED_OUTPUT_ONLY = ("createTime", "modelVersionId", "privateEndpoints", "status")
DEPLOY_TIMEOUT_S = 600.0
"""How long a deployed model's process may take to answer health 200."""
HEALTH_POLL_S = 0.2
DEPLOYING, DEPLOYED, UNDEPLOYING = "DEPLOYING", "DEPLOYED", "UNDEPLOYING"


def new_id() -> str:
    """A 19-digit numeric id, like Vertex's."""
    return str(secrets.randbelow(9 * 10**18) + 10**18)


def endpoint_not_found(name: str) -> ModelError:
    return ModelError(404, f"Endpoint {name} does not exist", "NOT_FOUND")


def failed_precondition(message: str) -> ModelError:
    return ModelError(400, message, "FAILED_PRECONDITION")


def operation(
    name: str, kind: str, created: str, response: dict | None = None, error: dict | None = None
) -> dict:
    """An operation in REST form (``google.longrunning``); done when it has either outcome."""
    found: dict[str, Any] = {
        "name": name,
        "metadata": {
            "@type": f"{TYPE_PREFIX}{kind}",
            "genericMetadata": {"createTime": created, "updateTime": now_rfc3339()},
        },
        "done": response is not None or error is not None,
    }
    if response is not None:
        found["response"] = response
    if error is not None:
        found["error"] = error
    return found


@dataclass(frozen=True)
class EndpointRef:
    parent: str
    endpoint_id: str

    @property
    def name(self) -> str:
        return f"{self.parent}/endpoints/{self.endpoint_id}"


# -- the service ---------------------------------------------------------------------------------


class Endpoints:
    """Endpoints, deployed models and their serving processes, over the store."""

    def __init__(
        self,
        store: Store,
        models: Models,
        settings: LocalSettings,
        deploy_timeout_s: float = DEPLOY_TIMEOUT_S,
    ) -> None:
        self.store, self.models, self.settings = store, models, settings
        self.deploy_timeout_s = deploy_timeout_s
        self._procs: dict[tuple[str, str], ServingProcess] = {}
        """The serving process of each (endpoint name, deployed model id): a DeployedModel's id
        is unique within its endpoint only."""
        self._credits: dict[tuple[str, str], dict[str, int]] = {}
        """Round-robin credit per (endpoint, its split): a new split starts afresh."""
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._undeploys: list[threading.Thread] = []
        # Predictions are proxied on the server's event loop, never in a worker thread: a model
        # that hangs holds a connection, not one of the few threads every other route needs.
        # trust_env=False: no HTTP(S)_PROXY may route 127.0.0.1 elsewhere; no pool limit: each
        # waiting prediction has its connection, as each has its deadline.
        self._http = httpx.AsyncClient(
            trust_env=False, timeout=None, limits=httpx.Limits(max_connections=None)
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Serve what the store says is deployed: a deploy that was under way fails; a deployed
        model's process starts again (one a crash left running is stopped first)."""
        for record in self.store.list_deployments():
            if pid_runs(record.get("pid"), record.get("argv", [])):
                self._process_of(record).stop(self.settings.grace_s)
            if record["state"] == UNDEPLOYING:
                self._finish_undeploy(record, None)  # its process was just stopped
                continue
            if record["state"] == DEPLOYING:
                self._fail_deploy(record, "the control plane stopped before it was healthy")
                continue
            try:
                self._spawn(record)
            except (OSError, ValueError, ServingCommandError):
                # Left deployed without a process: :predict answers 503 naming it.
                log.exception("deployed model %s: serving process not started", record["id"])
                continue
            log.info("deployed model %s: serving process started again", record["id"])

    def shutdown(self) -> None:
        """Stop every serving process (SIGTERM together, then SIGKILL after the grace); the
        deployed models stay deployed and start again with the control plane."""
        self._stopping.set()
        with self._lock:
            procs = list(self._procs.items())
            undeploys = list(self._undeploys)
        threads = [threading.Thread(target=p.stop, args=(self.settings.grace_s,)) for _, p in procs]
        for thread in threads:
            thread.start()
        for thread in threads + undeploys:  # an undeploy under way stops its process itself
            thread.join()
        for record in self.store.list_deployments():
            if record["state"] == DEPLOYING:
                self._fail_deploy(record, "the local platform was stopped (vtx local down)")

    async def aclose(self) -> None:
        """Close the predictions' HTTP client (the server's lifespan, on its event loop)."""
        await self._http.aclose()

    # -- endpoints ---------------------------------------------------------------------------

    def create(self, parent: str, endpoint: dict, endpoint_id: str | None) -> dict:
        problems = endpoint_problems(endpoint, endpoint_id)
        if problems:
            raise invalid("; ".join(problems))
        endpoint_id = endpoint_id or self._unused_id(parent)
        if self.store.get_endpoint(f"{parent}/endpoints/{endpoint_id}") is not None:
            raise ModelError(
                409, f"Endpoint {parent}/endpoints/{endpoint_id} already exists", "ALREADY_EXISTS"
            )
        now = now_rfc3339()
        stored = {k: v for k, v in endpoint.items() if k not in ENDPOINT_OUTPUT_ONLY}
        if "privateServiceConnectConfig" in stored:
            stored["privateServiceConnectConfig"] = {
                k: v
                for k, v in stored["privateServiceConnectConfig"].items()
                if k != "serviceAttachment"  # output only
            }
        stored.update(
            name=f"{parent}/endpoints/{endpoint_id}",
            createTime=now,
            updateTime=now,
            etag=new_id(),
        )
        self.store.put_endpoint(stored["name"], stored)
        name = f"{stored['name']}/operations/{new_id()}"
        response = {"@type": f"{TYPE_PREFIX}Endpoint", **stored}
        self.store.put_operation(
            name, operation(name, "CreateEndpointOperationMetadata", now, response)
        )
        return operation(name, "CreateEndpointOperationMetadata", now)

    def _unused_id(self, parent: str) -> str:
        while self.store.get_endpoint(f"{parent}/endpoints/{(endpoint_id := new_id())}"):
            pass
        return endpoint_id

    def get(self, ref: EndpointRef) -> dict:
        found = self.store.get_endpoint(ref.name)
        if found is None:
            raise endpoint_not_found(ref.name)
        return found

    def list(self, parent: str, filter: str) -> list[tuple[int, dict]]:
        """(position, endpoint) of ``parent``, newest first."""
        try:
            matches = parse_model_filter(filter, ENDPOINT_FIELDS)
        except ModelFilterError as exc:
            raise invalid(str(exc)) from exc
        found = [
            (p, e)
            for p, e in self.store.list_endpoints()
            if e["name"].startswith(parent + "/") and matches(e)
        ]
        return found[::-1]

    def delete(self, ref: EndpointRef) -> dict:
        """Refused while models are deployed (or deploying, or undeploying), as Vertex refuses
        it. Checked and deleted under the lock: of two deletes that race, one gets 404."""
        with self._lock:
            endpoint = self.get(ref)
            deploying = [r["id"] for r in self._records(ref.name)]
            if endpoint.get("deployedModels") or deploying:
                ids = [d["id"] for d in endpoint.get("deployedModels", [])] or deploying
                raise failed_precondition(
                    f"Endpoint {ref.name} has deployed models ({', '.join(ids)}): undeploy them "
                    f"before deleting the endpoint"
                )
            if not self.store.delete_endpoint(ref.name):
                raise endpoint_not_found(ref.name)
        name = f"{ref.name}/operations/{new_id()}"  # under the endpoint, as its other operations
        done = operation(name, "DeleteOperationMetadata", now_rfc3339(), {"@type": EMPTY_TYPE})
        self.store.put_operation(name, done)
        return done

    def operation(self, name: str) -> dict:
        found = self.store.get_operation(name)
        if found is None:
            raise ModelError(404, f"Operation {name} does not exist", "NOT_FOUND")
        return found

    # -- deploy and undeploy -----------------------------------------------------------------

    def deploy(self, ref: EndpointRef, deployed: dict, split: dict[str, int]) -> dict:
        """DeployModel: check, start the serving process, answer an operation that completes
        when the process is healthy."""
        endpoint = self.get(ref)
        version = self._model_of(ref.parent, deployed)
        problems = resources_problems(deployed)
        existing = {d["id"] for d in endpoint.get("deployedModels", [])}
        existing |= {r["id"] for r in self._records(ref.name)}
        deployed_id = deployed.get("id") or self._unused_deployed_id(ref.name)
        if deployed.get("id") and not DEPLOYED_MODEL_ID.match(deployed_id):
            problems.append(
                f"deployedModel.id: {deployed_id!r}: up to 10 digits, or a letter "
                f"then up to 62 of a-z, 0-9 and '-'"
            )
        if deployed_id in existing:
            problems.append(f"deployedModel.id: {deployed_id} is already deployed here")
        if endpoint.get("network") and existing:
            raise failed_precondition(
                f"Endpoint {ref.name} is a private endpoint (network {endpoint['network']}): it "
                f"serves one model, and {sorted(existing)[0]} is deployed to it"
            )
        problems += split_problems(split, existing | {"0"})
        if not version.get("containerSpec"):
            problems.append(
                f"deployedModel.model: {version['name']} has no containerSpec: the local "
                f"platform runs custom serving containers only"
            )
        if problems:
            raise invalid("; ".join(problems))
        now = now_rfc3339()
        stored = {k: v for k, v in deployed.items() if k not in DEPLOYED_OUTPUT_ONLY}
        stored.update(
            id=deployed_id,
            model=version["name"],
            modelVersionId=version["versionId"],
            createTime=now,
        )
        stored.setdefault("displayName", version.get("displayName", ""))
        name = f"{ref.name}/operations/{new_id()}"
        record = {
            "id": deployed_id,
            "endpoint": ref.name,
            "state": DEPLOYING,
            "operation": name,
            "createTime": now,
            "deployedModel": stored,
            "trafficSplit": split,
            "model": version,
        }
        try:
            record = self._spawn(record)
        except ServingCommandError as exc:
            raise invalid(str(exc)) from exc
        except (OSError, ValueError) as exc:  # no such program or cwd, a NUL in argv or env
            message = f"deployedModel.model: its serving command cannot be started: {exc}"
            raise invalid(message) from exc
        pending = operation(name, "DeployModelOperationMetadata", now)
        self.store.put_operation(name, pending)
        return pending

    def _model_of(self, parent: str, deployed: dict) -> dict:
        name = str(deployed.get("model", ""))
        named = numbered_name(name)  # by the project's id or its number: the same model
        prefix = f"{parent}/models/"
        if not named.startswith(prefix):
            raise invalid(
                f"deployedModel.model: {name!r} must be a model of {parent} ({prefix}ID[@VERSION])"
            )
        return self.models.get(ModelRef.parse(parent, named.removeprefix(prefix)))

    def _unused_deployed_id(self, endpoint: str) -> str:
        while self.store.get_deployment(endpoint, deployed_id := new_id()) is not None:
            pass
        return deployed_id

    def _records(self, endpoint_name: str) -> list[dict]:
        return [r for r in self.store.list_deployments() if r["endpoint"] == endpoint_name]

    def _spawn(self, record: dict) -> dict:
        """Start the record's serving process on a free port; watch it until healthy."""
        _, project_number, _, location, _, endpoint_id = record["endpoint"].split("/")
        model, deployed = record["model"], record["deployedModel"]
        port = free_port()
        machine = deployed.get("dedicatedResources", {}).get("machineSpec", {})
        env = serving_env(
            model,
            endpoint_id=endpoint_id,
            deployed_model_id=record["id"],
            project_number=project_number,
            port=port,
            machine_spec=machine,
            gcs_endpoint=self.settings.gcs_endpoint,
        )
        container = model.get("containerSpec", {})
        argv = serving_argv(container, env)
        routes = routes_of(container, endpoint_id, record["id"])
        # Under the endpoint's project and location: endpoint ids are unique there only.
        folder = self.settings.data_dir / "endpoints" / project_number / location / endpoint_id
        log_path = folder / f"{record['id']}.log"
        process = ServingProcess.start(argv, env, port, routes, log_path, self.settings.cwd)
        note = accelerator_note(record["id"], machine)
        if note:
            with log_path.open("a") as handle:
                handle.write(f"[vtx local] {note}\n")
        record = {
            **record,
            "pid": process.pid,
            "port": port,
            "argv": argv,
            "logPath": str(log_path),
            "routes": [routes.health, routes.predict],
        }
        with self._lock:
            self._procs[record["endpoint"], record["id"]] = process
        self.store.put_deployment(record["endpoint"], record["id"], record)
        threading.Thread(
            target=self._await_health,
            args=(record, process),
            daemon=True,
            name=f"vtx-serving-{record['id']}",
        ).start()
        return record

    def _process_of(self, record: dict) -> ServingProcess:
        health, predict = record.get("routes", ["/", "/"])
        routes = routes_of({"healthRoute": health, "predictRoute": predict}, "", "")
        return ServingProcess(record["pid"], record["port"], routes, Path(record["logPath"]), None)

    def _await_health(self, record: dict, process: ServingProcess) -> None:
        deadline = time.monotonic() + self.deploy_timeout_s
        while not self._stopping.is_set():
            if process.healthy():
                if record["state"] == DEPLOYING:
                    self._complete_deploy(record)
                return
            code = process.exit_code()
            if code is not None:
                if record["state"] == DEPLOYING:
                    self._fail_deploy(record, f"its serving process exited with code {code}")
                return
            if record["state"] == DEPLOYING and time.monotonic() > deadline:
                process.stop(self.settings.grace_s)
                self._fail_deploy(
                    record, f"its serving process was not healthy after {self.deploy_timeout_s:g} s"
                )
                return
            time.sleep(HEALTH_POLL_S)

    def _complete_deploy(self, record: dict) -> None:
        with self._lock:
            endpoint = self.store.get_endpoint(record["endpoint"])
            if endpoint is None:
                return
            deployed = record["deployedModel"]
            private = private_endpoints(endpoint, record)
            if private is not None:
                deployed = {**deployed, "privateEndpoints": private}
                record = {**record, "deployedModel": deployed}
            if psc_enabled(endpoint):
                config = endpoint["privateServiceConnectConfig"]
                config["serviceAttachment"] = service_attachment(endpoint["name"])
            endpoint["deployedModels"] = [*endpoint.get("deployedModels", []), deployed]
            split = {
                (record["id"] if k == "0" else k): v for k, v in record["trafficSplit"].items()
            }
            if split:
                endpoint["trafficSplit"] = {k: v for k, v in split.items() if v}
            endpoint.update(updateTime=now_rfc3339(), etag=new_id())
            self.store.put_endpoint(endpoint["name"], endpoint)
            self.store.put_deployment(endpoint["name"], record["id"], {**record, "state": DEPLOYED})
            response = {"@type": f"{TYPE_PREFIX}DeployModelResponse", "deployedModel": deployed}
            self.store.put_operation(
                record["operation"],
                operation(
                    record["operation"],
                    "DeployModelOperationMetadata",
                    record["createTime"],
                    response,
                ),
            )

    def _fail_deploy(self, record: dict, reason: str) -> None:
        lines = log_tail(Path(record.get("logPath", "")))
        message = (
            f"Deploying model {record['deployedModel']['model']} to {record['endpoint']} "
            f"failed: {reason}. Its log: {record.get('logPath')}"
        )
        if lines:
            message += "; last lines:\n" + "\n".join(lines)
        with self._lock:
            self._procs.pop((record["endpoint"], record["id"]), None)
            self.store.delete_deployment(record["endpoint"], record["id"])
            error = {"code": 9, "message": message}  # FAILED_PRECONDITION
            self.store.put_operation(
                record["operation"],
                operation(
                    record["operation"],
                    "DeployModelOperationMetadata",
                    record["createTime"],
                    error=error,
                ),
            )

    def undeploy(self, ref: EndpointRef, deployed_id: str, split: dict[str, int]) -> dict:
        """UndeployModel: the model leaves the endpoint and its traffic at once; its process is
        stopped in the background (SIGTERM, then SIGKILL after the grace period), and the
        operation answered now is done once it is. Checked and changed under the lock: of two
        undeploys that race, the second gets 404."""
        with self._lock:
            endpoint = self.get(ref)
            ids = [d["id"] for d in endpoint.get("deployedModels", [])]
            if deployed_id not in ids:
                raise ModelError(
                    404, f"Deployed model {deployed_id} is not deployed to {ref.name}", "NOT_FOUND"
                )
            others = set(ids) - {deployed_id}
            problems = split_problems(split, others)
            current = endpoint.get("trafficSplit", {})
            if not split and others and int(current.get(deployed_id, 0)):
                problems.append(
                    f"trafficSplit: deployed model {deployed_id} has {current[deployed_id]}% of "
                    f"the traffic: give it to the others in this call's trafficSplit"
                )
            if problems:
                raise invalid("; ".join(problems))
            endpoint["deployedModels"] = [
                d for d in endpoint.get("deployedModels", []) if d["id"] != deployed_id
            ]
            kept = split or {k: v for k, v in current.items() if k != deployed_id}
            endpoint["trafficSplit"] = {k: v for k, v in kept.items() if v and others}
            if not endpoint["trafficSplit"]:
                endpoint.pop("trafficSplit")
            if not endpoint["deployedModels"]:
                endpoint.pop("deployedModels")
            endpoint.update(updateTime=now_rfc3339(), etag=new_id())
            self.store.put_endpoint(ref.name, endpoint)
            name = f"{ref.name}/operations/{new_id()}"
            now = now_rfc3339()
            pending = operation(name, "UndeployModelOperationMetadata", now)
            self.store.put_operation(name, pending)
            process = self._procs.pop((ref.name, deployed_id), None)
            stored = self.store.get_deployment(ref.name, deployed_id)
            record = {
                **(stored or {"id": deployed_id, "endpoint": ref.name}),
                "state": UNDEPLOYING,
                "undeploy": [name, now],
            }
            if stored is not None:  # kept until the process is gone: a crash finishes it then
                self.store.put_deployment(ref.name, deployed_id, record)
            # Off the request path: a container that ignores SIGTERM takes the whole grace.
            thread = threading.Thread(
                target=self._finish_undeploy,
                args=(record, process),
                daemon=True,
                name=f"vtx-undeploy-{deployed_id}",
            )
            self._undeploys.append(thread)
            thread.start()
        return pending

    def _finish_undeploy(self, record: dict, process: ServingProcess | None) -> None:
        """Stop an undeployed model's process, forget it, complete its operation."""
        if process is None and pid_runs(record.get("pid"), record.get("argv", [])):
            process = self._process_of(record)
        if process is not None:
            process.stop(self.settings.grace_s)
        name, created = record["undeploy"]
        response = {"@type": f"{TYPE_PREFIX}UndeployModelResponse"}
        with self._lock:
            self.store.delete_deployment(record["endpoint"], record["id"])
            self.store.put_operation(
                name, operation(name, "UndeployModelOperationMetadata", created, response)
            )
            current = threading.current_thread()
            self._undeploys = [t for t in self._undeploys if t is not current]

    # -- predict -----------------------------------------------------------------------------

    async def predict(self, ref: EndpointRef, request: dict) -> dict:
        """PredictionService.Predict: the body goes to the chosen deployed model's predict
        route; its ``predictions`` come back with the deployed model Vertex names. Awaited on
        the server's event loop; a model that does not answer within the endpoint's inference
        timeout is a 504 DEADLINE_EXCEEDED, as Vertex's own deadline is."""
        deployed, process, timeout_s = self._route(ref)
        if process is None or process.exit_code() is not None:
            raise self._unavailable(ref, deployed, process, "its serving process is not running")
        body = {k: integral(request[k]) for k in ("instances", "parameters") if k in request}
        try:
            async with asyncio.timeout(timeout_s):
                status, answer = await process.predict(self._http, json.dumps(body).encode())
        except TimeoutError as exc:  # before httpx's errors: the deadline is ours
            raise deadline_exceeded(deployed, timeout_s) from exc
        except httpx.TransportError as exc:
            raise self._unavailable(ref, deployed, process, f"it did not answer ({exc!r})") from exc
        return prediction_response(deployed, status, answer)

    def _route(self, ref: EndpointRef) -> tuple[dict, ServingProcess | None, float]:
        """The deployed model that serves the next prediction, its process (None when it has
        none running) and the endpoint's inference timeout."""
        endpoint = self.get(ref)
        order = [d["id"] for d in endpoint.get("deployedModels", [])]
        with self._lock:
            split = endpoint.get("trafficSplit", {})
            key = (ref.name, json.dumps(split, sort_keys=True))
            chosen = pick_deployed(split, order, self._credits.setdefault(key, {}))
            if chosen is None:
                raise failed_precondition(
                    f"Endpoint {ref.name} has no deployed model with traffic: deploy a model to "
                    f"it (or give one traffic) first"
                )
            deployed = next(d for d in endpoint["deployedModels"] if d["id"] == chosen)
            return deployed, self._procs.get((ref.name, chosen)), inference_timeout_s(endpoint)

    def _unavailable(
        self, ref: EndpointRef, deployed: dict, process: ServingProcess | None, detail: str
    ) -> ModelError:
        """Vertex's answer when a deployed model cannot serve: 503 UNAVAILABLE."""
        record = self.store.get_deployment(ref.name, deployed["id"]) or {}
        code = process.exit_code() if process is not None else None
        why = f"its serving process exited with code {code}" if code is not None else detail
        return ModelError(
            503,
            f"Deployed model {deployed['id']} ({deployed['model']}) is unavailable: {why}. "
            f"Its log: {record.get('logPath')}; undeploy and deploy it again",
            "UNAVAILABLE",
        )


def accelerator_note(deployed_id: str, machine: dict) -> str | None:
    """The "runs on CPU" line of a deployed model that asked for accelerators."""
    kind, count = machine.get("acceleratorType"), int(machine.get("acceleratorCount", 0) or 0)
    if not kind or kind == "ACCELERATOR_TYPE_UNSPECIFIED" or not count:
        return None
    return (
        f"deployed model {deployed_id} asks for {count} x {kind} on {machine.get('machineType')} "
        f"(checked against the catalog); the local platform runs it on this machine's CPU"
    )
