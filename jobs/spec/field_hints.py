""" "You wrote X; here it is called Y": the one table of hints for fields that tutorials invent
or that belong to the other format (gcloud's camelCase in a template, a template key in REST).

Keys are field names lower-cased without '_' and '-', so ``persistent_disk``, ``persistentDisk``
and ``persistent-disk`` find the same entry. Each entry says what to write in a vtx template and
in a REST/gcloud document; None where the name is a real field of that form."""

from __future__ import annotations

from typing import NamedTuple

NO_PERSISTENT_DISK = (
    "CustomJob has no persistent disk: write checkpoints to gs:// via AIP_CHECKPOINT_DIR "
    "(the stack sets baseOutputDirectory for every run)"
)


class Hint(NamedTuple):
    template: str | None
    rest: str | None


def _both(text: str) -> Hint:
    return Hint(text, text)


def _template_only(text: str) -> Hint:
    return Hint(text, None)


_SPOT = Hint("use scheduling.strategy: spot", "use scheduling.strategy: SPOT")
_GPUS = _template_only("write accelerator: TYPE and accelerator_count: N")

FIELD_HINTS: dict[str, Hint] = {
    "persistentdisksizegb": _both(NO_PERSISTENT_DISK),
    "persistentdisktype": _both(NO_PERSISTENT_DISK),
    "persistentdisk": _both(NO_PERSISTENT_DISK),
    "persistentdisks": _both(NO_PERSISTENT_DISK),
    "persistentdiskspec": _both(NO_PERSISTENT_DISK),
    "usespot": _SPOT,
    "spot": _SPOT,
    "preemptible": _SPOT,
    "usepreemptible": _SPOT,
    "region": Hint(None, "the region is the endpoint's (the stack's), not a CustomJob field"),
    "machinetype": _template_only("write machine"),
    "replicacount": _template_only("write replicas"),
    "acceleratortype": _template_only("write accelerator"),
    "gpus": _GPUS,
    "gpu": _GPUS,
    "numgpus": _GPUS,
    "gpucount": _template_only("write accelerator_count"),
    "imageuri": _template_only("write image"),
    "containeruri": _template_only("write image"),
    "timeout": _template_only("write it under scheduling: {timeout: 24h}"),
    "workerpoolspecs": _template_only(
        "gcloud YAML is camelCase (workerPoolSpecs); in a vtx template use pools:"
    ),
    "bootdisksizegb": _template_only("write boot_disk: {size_gb: N}"),
    "bootdisktype": _template_only("write boot_disk: {type: pd-ssd}"),
    "maxwaitduration": _template_only("write max_wait"),
    "reservationaffinity": _template_only(
        "write it in the pool: reservation: {affinity: specific, values: "
        "[projects/P/zones/Z/reservations/NAME]}"
    ),
    "reservationaffinitytype": _template_only("write reservation: {affinity: none|any|specific}"),
    "dws": Hint("use scheduling.strategy: flex_start", "use scheduling.strategy: FLEX_START"),
    "flexstart": Hint("use scheduling.strategy: flex_start", "use scheduling.strategy: FLEX_START"),
    "restartjobonworkerrestart": _template_only("write restart_job_on_worker_restart"),
    "serviceaccount": _template_only(
        "the job runs as the stack's trainer service account; remove it"
    ),
    "network": _template_only("the stack sets the network; remove it"),
}


def normalised(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def field_hint(name: str, *, rest: bool) -> str | None:
    """What to write instead of the unknown field ``name`` in a template (or REST document)."""
    hint = FIELD_HINTS.get(normalised(name))
    if hint is None:
        return None
    return hint.rest if rest else hint.template
