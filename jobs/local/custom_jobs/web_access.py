"""``webAccessUris``: what Vertex fills in for a CustomJob with ``jobSpec.enableWebAccess``.

Vertex gives one URI per training node, keyed by the node's name (``workerpool0-0`` for the
primary, ``workerpool1-0``, ``workerpool1-1``... for the second pool: the
``CustomJob.web_access_uris`` field's doc), each opening an interactive shell in that node's
container. Locally the replicas are processes on this machine, so there is no shell to serve:
the URI names the replica on this control plane, and that route answers 501 saying so, with the
replica's pid and working directory (where a user's own shell can reach it).
"""

from __future__ import annotations

from jobs.local.platform import vertex_env

SHELL_PATH = "/vtx/jobs/{job_id}/replicas/{replica}:shell"
"""The route each local web access URI points at (it answers 501: not served here)."""


def web_access_uris(job: dict, job_id: str, port: int) -> dict[str, str]:
    """Every replica's URI when the job asked for web access, else nothing (Vertex leaves the
    field empty then)."""
    if not job.get("jobSpec", {}).get("enableWebAccess"):
        return {}
    return {
        slot.name: f"http://127.0.0.1:{port}" + SHELL_PATH.format(job_id=job_id, replica=slot.name)
        for slot in vertex_env.replica_slots(job)
    }
