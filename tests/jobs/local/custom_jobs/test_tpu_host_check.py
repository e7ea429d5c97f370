"""The TPU host check a local rehearsal of a TPU template runs instead of MaxText: what it holds
each host's environment to, and the hosts meeting at host 0 (threads standing in for hosts)."""

from __future__ import annotations

import json
import threading

import pytest

from jobs.local.custom_jobs.tpu_host_check import TpuHost, check_host, meet
from jobs.local.plumbing.ports import free_ports

HOSTS = ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003", "127.0.0.1:9004"]


def host_env(worker: int = 1, hostnames: list[str] = HOSTS, **more: str) -> dict[str, str]:
    """What the local platform gives host ``worker`` of a 4-host slice."""
    machine = {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "4x4"}
    job = {"workerPoolSpecs": [{"machineSpec": machine, "replicaCount": "1"}]}
    spec = {
        "cluster": {"workerpool0": HOSTS},
        "environment": "cloud",
        "task": {"type": "workerpool0", "index": worker},
        "job": json.dumps(job),
    }
    return {
        "TPU_WORKER_ID": str(worker),
        "TPU_WORKER_HOSTNAMES": ",".join(hostnames),
        "CLUSTER_SPEC": json.dumps(spec),
        **more,
    }


def test_a_slice_hosts_environment_passes() -> None:
    host, problems = check_host(host_env(), hosts=4)
    assert problems == []
    assert host == TpuHost(1, HOSTS)
    assert host.address == ("127.0.0.1", 9001)


@pytest.mark.parametrize(
    ("environ", "hosts", "problem"),
    [
        ({}, None, "TPU_WORKER_ID and TPU_WORKER_HOSTNAMES: not set (not a TPU host)"),
        (host_env(), 2, "TPU_WORKER_HOSTNAMES: 4 host(s), the slice has 2"),
        (host_env(TPU_WORKER_ID="4"), 4, "TPU_WORKER_ID: '4' is not a host of 0..3"),
        (host_env(TPU_WORKER_ID="-1"), 4, "TPU_WORKER_ID: '-1' is not a host of 0..3"),
        (host_env(hostnames=[*HOSTS[:3], "127.0.0.1:9009"]), 4, "CLUSTER_SPEC: cluster is"),
        (host_env(hostnames=[*HOSTS[:3], HOSTS[0]]), None, "an address is listed twice"),
        (host_env(hostnames=["tpu-0", *HOSTS[1:]]), 4, "'tpu-0' is not HOST:PORT"),
        (host_env(CLUSTER_SPEC="{}"), 4, "CLUSTER_SPEC: not the JSON Vertex sets"),
        (host_env(MASTER_ADDR="127.0.0.1"), 4, "MASTER_ADDR: set on a TPU host"),
        (host_env(TF_CONFIG="{}"), 4, "TF_CONFIG: set on a TPU host"),
    ],
)  # fmt: skip
def test_an_environment_that_is_not_a_slice_hosts_is_refused_naming_the_variable(
    environ: dict[str, str], hosts: int | None, problem: str
) -> None:
    host, problems = check_host(environ, hosts)
    assert host is None
    assert any(problem in p for p in problems), problems


def test_a_task_that_is_not_this_workers_is_refused() -> None:
    environ = host_env(1)
    environ["TPU_WORKER_ID"] = "3"
    _, problems = check_host(environ, 4)
    assert "CLUSTER_SPEC: task is {'type': 'workerpool0', 'index': 1}, not workerpool0 index 3" in (
        problems
    )


def test_every_host_meets_host_0() -> None:
    hostnames = [f"127.0.0.1:{port}" for port in free_ports(3)]
    failures: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            meet(TpuHost(worker, hostnames), timeout_s=60)
        except OSError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in (2, 1, 0)]  # others first
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert failures == [] and not any(t.is_alive() for t in threads)


def test_a_host_whose_host_0_never_comes_gives_up() -> None:
    [port] = free_ports(1)
    with pytest.raises(OSError):
        meet(TpuHost(1, [f"127.0.0.1:{port}", "127.0.0.1:1"]), timeout_s=0.3)
