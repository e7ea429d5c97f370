"""Reading the security settings of VM-shaped resources, whatever their flavour.

The stack itself declares no VM (Vertex runs the training VMs), but a team may add one beside it:
a Compute Engine instance or template, or a Vertex AI Workbench instance. They spell the same
settings differently (``networkInterfaces[].accessConfigs`` vs ``gceSetup.disablePublicIp``), so
one reader gives the rules a single view, with paths in the resource's own inputs.

An instance made from a template or machine image inherits what it leaves unset; the rules judge
only what such an instance sets itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.policy.values import UNKNOWN, known

COMPUTE_VM_TYPES = frozenset(
    {
        "gcp:compute/instance:Instance",
        "gcp:compute/instanceTemplate:InstanceTemplate",
        "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
    }
)
DERIVED_VM_TYPES = frozenset(
    {
        "gcp:compute/instanceFromTemplate:InstanceFromTemplate",
        "gcp:compute/instanceFromMachineImage:InstanceFromMachineImage",
    }
)
WORKBENCH_INSTANCE = "gcp:workbench/instance:Instance"
PROJECT_METADATA = "gcp:compute/projectMetadata:ProjectMetadata"
PROJECT_METADATA_ITEM = "gcp:compute/projectMetadataItem:ProjectMetadataItem"

_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})


@dataclass(frozen=True)
class Vm:
    """One VM-shaped resource's settings; every path is relative to its inputs."""

    derived: bool
    """Unset fields come from a template or machine image (or are unknown at preview): the
    rules judge only what is set."""
    external_ips: tuple[str, ...]
    """Paths of the settings that give the VM an address reachable from the internet."""
    ip_forwarding: str | None
    """Path of the setting that lets the VM route packets not addressed to it, when on."""
    default_identity: str | None
    """Path of the service account setting when the VM would run as the Compute Engine default."""
    metadata_path: str
    metadata: Mapping[str, Any] | None
    """None when unset or not known at preview."""
    metadata_known: bool
    """False when the metadata is computed and only known at apply."""
    shielded_path: str
    shielded: Mapping[str, Any]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _metadata(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _compute_vm(props: Mapping[str, Any], derived: bool) -> Vm:
    external = []
    for index, nic in enumerate(_list(props.get("networkInterfaces"))):
        for key in ("accessConfigs", "ipv6AccessConfigs"):
            # An access config, even an empty one, is an ephemeral external address.
            if _list(_mapping(nic).get(key)):
                external.append(f"networkInterfaces[{index}].{key}")
    account = props.get("serviceAccount")
    default_identity = None
    if isinstance(account, Mapping):
        # pulumi-gcp: "If not given, the default Google Compute Engine service account is used."
        email = account.get("email")
        if email != UNKNOWN and (not email or str(email) == "default"):
            default_identity = "serviceAccount.email"
    return Vm(
        derived=derived,
        external_ips=tuple(external),
        ip_forwarding="canIpForward" if props.get("canIpForward") is True else None,
        default_identity=default_identity,
        metadata_path="metadata",
        metadata=_metadata(props.get("metadata")),
        metadata_known=props.get("metadata") != UNKNOWN,
        shielded_path="shieldedInstanceConfig",
        shielded=_mapping(props.get("shieldedInstanceConfig")),
    )


def _workbench_vm(props: Mapping[str, Any]) -> Vm:
    if props.get("gceSetup") == UNKNOWN:
        return Vm(
            derived=True,
            external_ips=(),
            ip_forwarding=None,
            default_identity=None,
            metadata_path="gceSetup.metadata",
            metadata=None,
            metadata_known=False,
            shielded_path="gceSetup.shieldedInstanceConfig",
            shielded={},
        )
    setup = _mapping(props.get("gceSetup"))
    public = setup.get("disablePublicIp")
    accounts = _list(setup.get("serviceAccounts"))
    default_identity = None
    # Workbench, like gcloud, falls back to the Compute Engine default account.
    if setup.get("serviceAccounts") != UNKNOWN and (
        not accounts or any(not _mapping(a).get("email") for a in accounts)
    ):
        default_identity = "gceSetup.serviceAccounts"
    return Vm(
        derived=False,
        # Workbench gives its VM a public address unless told not to.
        external_ips=("gceSetup.disablePublicIp",)
        if public is not True and public != UNKNOWN
        else (),
        ip_forwarding=(
            "gceSetup.enableIpForwarding" if setup.get("enableIpForwarding") is True else None
        ),
        default_identity=default_identity,
        metadata_path="gceSetup.metadata",
        metadata=_metadata(setup.get("metadata")),
        metadata_known=setup.get("metadata") != UNKNOWN,
        shielded_path="gceSetup.shieldedInstanceConfig",
        shielded=_mapping(setup.get("shieldedInstanceConfig")),
    )


def vm_of(resource_type: str, props: Mapping[str, Any]) -> Vm | None:
    """The VM view of a resource; None for anything that is not a VM or template."""
    if resource_type in COMPUTE_VM_TYPES:
        return _compute_vm(props, derived=False)
    if resource_type in DERIVED_VM_TYPES:
        return _compute_vm(props, derived=True)
    if resource_type == WORKBENCH_INSTANCE:
        return _workbench_vm(props)
    return None


def metadata_flag(metadata: Mapping[str, Any] | None, key: str) -> bool | None:
    """A boolean metadata key as GCE reads it ("TRUE", "1"...); None when unset or unknown."""
    if metadata is None or not known(metadata.get(key)):
        return None
    value = str(metadata[key]).strip().lower()
    return True if value in _TRUE else False if value in _FALSE else None


def metadata_scopes(
    resource_type: str, props: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, metadata) pairs a resource sets: a VM's own, or the project-wide defaults."""
    vm = vm_of(resource_type, props)
    if vm is not None:
        return [(vm.metadata_path, vm.metadata)] if vm.metadata is not None else []
    if resource_type == PROJECT_METADATA:
        metadata = _metadata(props.get("metadata"))
        return [("project metadata", metadata)] if metadata is not None else []
    if resource_type == PROJECT_METADATA_ITEM and known(props.get("key")):
        return [("project metadata", {str(props["key"]): props.get("value")})]
    return []
