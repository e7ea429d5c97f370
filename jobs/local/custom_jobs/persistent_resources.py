"""PersistentResourceService v1: create, get, list, update, delete and reboot persistent
resources, and what they mean for the jobs that name one (resource_pools.py decides; this module
reads and writes the store under the executor's lock and answers the executor's hooks).

A resource holds its pools' machines in the capacity model while it exists (as a started job
holds its accelerators) and their quota from its create (as a job does); a job that names it
holds neither, and starts on free replicas of its pools without provisioning.
"""

from __future__ import annotations

import secrets

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.contract import region_of
from jobs.core.formats import now_rfc3339
from jobs.local.custom_jobs import resource_pools as pools
from jobs.local.custom_jobs.executor import Executor, ExecutorError
from jobs.local.custom_jobs.resource_pools import PoolError, State
from jobs.local.platform import capacity
from jobs.local.platform.capacity import Admission, AdmissionDecision, Need
from jobs.local.platform.operations import deleted
from jobs.local.platform.store import Store

COLLECTION = "persistentResources"


class PersistentResources:
    """The service over the store; every change under the executor's lock."""

    def __init__(self, store: Store, executor: Executor, catalog: Catalog | None = None) -> None:
        self.store = store
        self.executor = executor
        self.catalog = catalog or load_catalog()
        executor.pools = self

    # -- the API -------------------------------------------------------------------------------

    def create(self, parent: str, resource_id: str, body: dict) -> dict:
        region = parent.rsplit("/", 1)[-1]
        problems = pools.create_problems(resource_id, body, region, self.catalog)
        if problems:
            raise PoolError(400, "; ".join(problems))
        name = f"{parent}/{COLLECTION}/{resource_id}"
        boot_disk = {
            str(p["machineSpec"]["machineType"]): self._boot_disk(p["machineSpec"]["machineType"])
            for p in body["resourcePools"]
        }
        stamp = now_rfc3339()
        with self.executor.lock:
            if self.store.get_persistent_resource(name) is not None:
                raise PoolError(409, f"PersistentResource {name} already exists", "ALREADY_EXISTS")
            stored = pools.new_resource(name, body, boot_disk, stamp)
            self._check_quota(stored)
            self.store.put_persistent_resource(name, stored)
            op = pools.operation(self._op_name(name), "Create", stamp, "provisioning")
            self.store.put_operation(op["name"], op)
            self._settle(name)
            return self.store.get_operation(op["name"]) or op

    def get(self, name: str) -> dict:
        with self.executor.lock:
            self._settle(name)
            return self._answered(self._found(name))

    def list(self, parent: str) -> list[tuple[int, dict]]:
        with self.executor.lock:
            found = [
                (pos, r)
                for pos, r in self.store.list_persistent_resources()
                if r["name"].startswith(parent + "/")
            ]
            for _, resource in found:
                self._settle(resource["name"])
            return [
                (pos, self._answered(self.store.get_persistent_resource(r["name"]) or r))
                for pos, r in reversed(found)
            ]

    def update(self, name: str, change: dict, mask: list[str]) -> dict:
        if not mask:
            raise PoolError(400, "updateMask: required (the fields to change)")
        stamp = now_rfc3339()
        with self.executor.lock:
            resource = self._ready(name, "updated")
            result = pools.updated(resource, change, mask)
            self._check_quota(result, without=name)
            self.store.put_persistent_resource(name, {**result, "updateTime": stamp})
            op = pools.operation(self._op_name(name), "Update", stamp, "updating")
            self.store.put_operation(op["name"], op)
            return op

    def reboot(self, name: str) -> dict:
        stamp = now_rfc3339()
        with self.executor.lock:
            resource = self._ready(name, "rebooted")
            self._refuse_if_busy(resource, "reboot")
            rebooting = {**resource, "state": State.REBOOTING.value, "updateTime": stamp}
            self.store.put_persistent_resource(name, rebooting)
            op = pools.operation(self._op_name(name), "Reboot", stamp, "rebooting")
            self.store.put_operation(op["name"], op)
            return op

    def delete(self, name: str) -> dict:
        with self.executor.lock:
            self._refuse_if_busy(self._found(name), "delete")
            if not self.store.delete_persistent_resource(name):
                raise self._not_found(name)
            op = deleted(name)
            self.store.put_operation(op["name"], op)
            return op

    def operation(self, name: str) -> dict:
        with self.executor.lock:
            self._settle(name.split("/operations/")[0])
            op = self.store.get_operation(name)
        if op is None:
            raise PoolError(404, f"Operation {name} does not exist", "NOT_FOUND")
        return op

    # -- the executor's hooks (called under its lock) ------------------------------------------

    def refusal(self, job: dict) -> str | None:
        """Why a job that names a resource cannot be created: no such resource in its
        location, or no pool of it can hold one of its worker pools."""
        rid = pools.resource_id_of(job)
        if rid is None:
            return None
        parent = job["name"].split("/customJobs/")[0]
        resource = self.store.get_persistent_resource(f"{parent}/{COLLECTION}/{rid}")
        if resource is None:
            return (
                f"jobSpec.persistentResourceId: persistent resource {rid!r} does not exist in "
                f"{parent}; create it first or name one of that location"
            )
        found = pools.placement(job, resource, self.catalog)
        return "; ".join(found) if isinstance(found, list) else None

    def admission(self, job: dict, running: list[dict]) -> AdmissionDecision | None:
        rid = pools.resource_id_of(job)
        if rid is None:
            return None
        name = f"{job['name'].split('/customJobs/')[0]}/{COLLECTION}/{rid}"
        self._settle(name)
        on_it = [
            j for j in running if pools.resource_id_of(j) == rid and _parent(j) == _parent(job)
        ]
        return pools.admission(job, self.store.get_persistent_resource(name), on_it, self.catalog)

    def reserved(self, for_quota: bool = False, without: str | None = None) -> list[Need]:
        """What the resources hold: their quota from their create, their machines once
        provisioned."""
        return [
            pools.need_of_resource(r, region_of(r["name"]), self.catalog)
            for _, r in self.store.list_persistent_resources()
            if (for_quota or pools.holds(r)) and r["name"] != without
        ]

    # -- helpers -------------------------------------------------------------------------------

    def _boot_disk(self, machine: str) -> tuple[str, int]:
        size = self.catalog.limits.boot_disk_size_gb.default or 100
        return self.catalog.boot_disk_types(machine)[0], size

    @staticmethod
    def _op_name(name: str) -> str:
        return f"{name}/operations/{secrets.randbelow(10**18)}"

    @staticmethod
    def _not_found(name: str) -> PoolError:
        return PoolError(404, f"PersistentResource {name} does not exist", "NOT_FOUND")

    def _found(self, name: str) -> dict:
        resource = self.store.get_persistent_resource(name)
        if resource is None:
            raise self._not_found(name)
        return resource

    def _ready(self, name: str, what: str) -> dict:
        self._settle(name)
        resource = self._found(name)
        if resource["state"] != State.RUNNING.value:
            raise PoolError(
                400,
                f"PersistentResource {name} is {resource['state']}: it can be {what} once it "
                f"is RUNNING",
                "FAILED_PRECONDITION",
            )
        return resource

    def _jobs_on(self, resource: dict) -> list[dict]:
        rid = resource["name"].rsplit("/", 1)[-1]
        parent = resource["name"].split(f"/{COLLECTION}/")[0]
        return [
            j
            for j in self.executor.started_jobs()
            if pools.resource_id_of(j) == rid and _parent(j) == parent
        ]

    def _refuse_if_busy(self, resource: dict, what: str) -> None:
        """Jobs running on a resource: a delete or reboot waits for them here (what Vertex does
        to them is UNCONFIRMED: docs/vertex-facts.md, "Persistent resources")."""
        busy = [j["name"] for j in self._jobs_on(resource)]
        if busy:
            raise PoolError(
                400,
                f"PersistentResource {resource['name']} runs {len(busy)} job(s) "
                f"({', '.join(busy)}): cancel them or let them end before the {what}",
                "FAILED_PRECONDITION",
            )

    def _answered(self, resource: dict) -> dict:
        used = pools.used_replicas(resource, self._jobs_on(resource), self.catalog)
        return pools.with_usage(resource, used)

    def _check_quota(self, resource: dict, without: str | None = None) -> None:
        """Vertex's 429 when the region's quota cannot take the resource's machines beside the
        active jobs and the other resources (``without``: the one being updated, counted at its
        new size only)."""
        region = region_of(resource["name"])
        need = pools.need_of_resource(resource, region, self.catalog)
        holders = self.executor.job_needs() + self.reserved(for_quota=True, without=without)
        short = capacity.quota_shortfalls(
            self.executor.capacity, need, capacity.quota_in_use(holders, region)
        )
        if short:
            raise ExecutorError(429, "RESOURCE_EXHAUSTED", capacity.quota_message(short, region))

    def _settle(self, name: str) -> None:
        """Complete what a resource waits for (resource_pools.settled), and its operations."""
        resource = self.store.get_persistent_resource(name)
        if resource is None:
            return
        free = True
        if resource["state"] == State.PROVISIONING.value:
            need = pools.need_of_resource(resource, region_of(name), self.catalog)
            decision = capacity.admit(
                self.executor.capacity,
                need,
                capacity.held(self.executor.started_needs(), need.region),
                waited_s=0,
                default_max_wait_s=0,
            )
            free = decision.admission is Admission.START
        stamp = now_rfc3339()
        after = pools.settled(resource, free, stamp)
        if after is None:
            return
        self.store.put_persistent_resource(name, after)
        self._finish_operations(name, self._answered(after), stamp)

    def _finish_operations(self, name: str, answered: dict, stamp: str) -> None:
        for op_name in self.store.operations_under(f"{name}/operations/"):
            op = self.store.get_operation(op_name)
            if op is not None and not op.get("done"):
                self.store.put_operation(op_name, pools.finished(op, answered, stamp))


def _parent(job: dict) -> str:
    return str(job.get("name", "")).split("/customJobs/")[0]
