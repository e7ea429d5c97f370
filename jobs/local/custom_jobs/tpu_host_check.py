"""A stand-in for a TPU template's program on the local platform: each host of the slice checks
the environment the platform gave it, then the hosts meet as JAX's would, host 0 hearing from
every other before it exits 0.

`python3 -m jobs.local.custom_jobs.tpu_host_check [--hosts N]`

MaxText (JAX) is what the TPU templates run on Vertex; it is not installed here, so a local
rehearsal swaps only the program (`vtx launch TEMPLATE --set args.0=...`, jobs/templates/README.md
"TPUs") and keeps the template's machine, topology and scheduling. What it checks, on every host:

- ``TPU_WORKER_ID`` is a whole number below the number of hosts;
- ``TPU_WORKER_HOSTNAMES`` lists distinct ``HOST:PORT`` addresses, ``--hosts`` of them when
  given (the slice's VMs: `vtx catalog` lists each topology's);
- ``CLUSTER_SPEC`` agrees: its task is this pool's host ``TPU_WORKER_ID``, its cluster is that
  one pool with exactly those addresses, and its job is one replica (the slice);
- no PyTorch or TF variable is set (a slice is not a chief and workers).

Then the meeting: host 0 listens on its own address (the first hostname) and waits for each other
host to say its id; the others connect and wait for host 0's answer. Host 0 ends the job (the
primary), so the job succeeds only if every host passed its checks and reached host 0. The
addresses carry ports because the local platform's hosts are processes of one machine; on
Vertex, what a TPU host's variables hold is UNCONFIRMED (docs/vertex-facts.md, "TPUs").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

NOT_ON_A_TPU_HOST = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "TF_CONFIG")
"""The local platform sets these on GPU/CPU replicas of a distributed job, never on TPU hosts."""
MEET_TIMEOUT_S = 120.0
"""How long a host waits for the others (the slice's processes start together; this only ends
a run whose other hosts never came)."""
CHECK_FAILED = 1


@dataclass(frozen=True)
class TpuHost:
    """What one host of the slice was told: its id and every host's address."""

    worker_id: int
    hostnames: list[str]

    @property
    def address(self) -> tuple[str, int]:
        """Host 0's address, where the hosts meet."""
        host, _, port = self.hostnames[0].rpartition(":")
        return host, int(port)


def _hostname_problems(hostnames: list[str], hosts: int | None) -> list[str]:
    problems = []
    if hosts is not None and len(hostnames) != hosts:
        problems.append(
            f"TPU_WORKER_HOSTNAMES: {len(hostnames)} host(s), the slice has {hosts}: "
            f"{','.join(hostnames)}"
        )
    if len(set(hostnames)) != len(hostnames):
        problems.append(f"TPU_WORKER_HOSTNAMES: an address is listed twice: {','.join(hostnames)}")
    for name in hostnames:
        host, _, port = name.rpartition(":")
        if not host or not port.isdigit():
            problems.append(f"TPU_WORKER_HOSTNAMES: {name!r} is not HOST:PORT")
    return problems


def _cluster_spec_problems(text: str | None, worker_id: int, hostnames: list[str]) -> list[str]:
    try:
        spec = json.loads(text or "")
        task, cluster = spec["task"], spec["cluster"]
        job = json.loads(spec["job"])
        pools = job["workerPoolSpecs"]
    except (ValueError, TypeError, KeyError) as exc:
        return [f"CLUSTER_SPEC: not the JSON Vertex sets (task, cluster, job): {exc!r}"]
    problems = []
    if task != {"type": "workerpool0", "index": worker_id}:
        problems.append(f"CLUSTER_SPEC: task is {task}, not workerpool0 index {worker_id}")
    if cluster != {"workerpool0": hostnames}:
        problems.append(f"CLUSTER_SPEC: cluster is {cluster}, not workerpool0: {hostnames}")
    if len(pools) != 1 or int(pools[0].get("replicaCount", 0) or 0) != 1:
        problems.append("CLUSTER_SPEC: the job is not one pool of one replica (the slice)")
    return problems


def check_host(environ: Mapping[str, str], hosts: int | None) -> tuple[TpuHost | None, list[str]]:
    """This host as its environment describes it, and every way that environment is not a TPU
    host's of a slice with ``hosts`` VMs (None: any number)."""
    raw_id, raw_names = environ.get("TPU_WORKER_ID"), environ.get("TPU_WORKER_HOSTNAMES")
    if raw_id is None or raw_names is None:
        return None, ["TPU_WORKER_ID and TPU_WORKER_HOSTNAMES: not set (not a TPU host)"]
    hostnames = raw_names.split(",")
    problems = _hostname_problems(hostnames, hosts)
    if not raw_id.isdigit() or int(raw_id) >= len(hostnames):
        problems.append(f"TPU_WORKER_ID: {raw_id!r} is not a host of 0..{len(hostnames) - 1}")
        return None, problems
    worker_id = int(raw_id)
    problems += _cluster_spec_problems(environ.get("CLUSTER_SPEC"), worker_id, hostnames)
    problems += [f"{name}: set on a TPU host" for name in NOT_ON_A_TPU_HOST if name in environ]
    return (None if problems else TpuHost(worker_id, hostnames)), problems


def _serve(host: TpuHost, deadline: float) -> None:
    """Host 0: wait until every other host has said its id."""
    waiting = set(range(1, len(host.hostnames)))
    with socket.create_server(host.address, backlog=len(waiting)) as server:
        while waiting:
            server.settimeout(max(deadline - time.monotonic(), 0.01))
            conn, _ = server.accept()
            conn.settimeout(5)
            with conn, conn.makefile("rw") as stream:
                said = stream.readline().strip()
                if said.isdigit() and int(said) in waiting:
                    waiting.discard(int(said))
                    stream.write("ok\n")


def _join(host: TpuHost, deadline: float) -> None:
    """Another host: tell host 0 this host's id, retrying until it listens and answers."""
    while True:
        try:
            with (
                socket.create_connection(host.address, timeout=5) as conn,
                conn.makefile("rw") as stream,
            ):
                stream.write(f"{host.worker_id}\n")
                stream.flush()
                if stream.readline().strip() == "ok":
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"host 0 ({host.hostnames[0]}) did not answer")
        time.sleep(0.1)


def meet(host: TpuHost, timeout_s: float = MEET_TIMEOUT_S) -> None:
    """Every host reaches host 0 (raises OSError, a timeout among them, when one does not)."""
    deadline = time.monotonic() + timeout_s
    if host.worker_id == 0:
        _serve(host, deadline)
    else:
        _join(host, deadline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, help="the VMs of the slice (default: any number)")
    args = parser.parse_args(argv)
    host, problems = check_host(os.environ, args.hosts)
    if host is None:
        for problem in problems:
            print(f"TPU host check: {problem}", file=sys.stderr)
        return CHECK_FAILED
    count = len(host.hostnames)
    print(f"TPU host {host.worker_id} of {count}: environment checked", flush=True)
    try:
        meet(host)
    except OSError as exc:
        print(
            f"TPU host {host.worker_id}: the hosts did not meet at host 0: {exc}", file=sys.stderr
        )
        return CHECK_FAILED
    if host.worker_id == 0:
        print(f"TPU host 0: every host of {count} checked in", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
