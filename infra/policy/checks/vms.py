"""Checks on VMs: a team's own instances, templates or Workbench instances beside the stack.

The stack itself declares no VM (Vertex runs the training VMs). ``instances.vm_of`` gives every
kind of VM one view, with paths in the resource's own inputs; the checks follow CIS GCP 4.x.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.policy.instances import metadata_flag, metadata_scopes, vm_of
from infra.policy.rule_types import RuleContext


def instance_no_external_ip(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.9."""
    vm = vm_of(resource_type, props)
    return [f"{path} gives the VM a public IP address" for path in vm.external_ips] if vm else []


def instance_not_default_service_account(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.1 / 4.2 where the default account is implied (no-default-compute-identity
    catches it when named)."""
    vm = vm_of(resource_type, props)
    if vm is None or vm.default_identity is None:
        return []
    return [f"{vm.default_identity} is not set: the VM runs as the Compute Engine default account"]


def instance_block_project_ssh_keys(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.3. OS Login on the VM ignores metadata keys, so it counts as blocking them."""
    vm = vm_of(resource_type, props)
    if vm is None or not vm.metadata_known:
        return []
    blocked = metadata_flag(vm.metadata, "block-project-ssh-keys")
    if blocked or metadata_flag(vm.metadata, "enable-oslogin"):
        return []
    if vm.derived and blocked is None:
        return []
    return [
        f"{vm.metadata_path} does not set block-project-ssh-keys: project-wide SSH keys "
        "log in to this VM"
    ]


def instance_os_login(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 4.4: nothing turns OS Login off, on a VM or for the whole project."""
    return [
        f"{where} sets enable-oslogin false: SSH keys in metadata bypass IAM"
        for where, metadata in metadata_scopes(resource_type, props)
        if metadata_flag(metadata, "enable-oslogin") is False
    ]


def instance_no_serial_port(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.5: the interactive serial console accepts connections from any IP address."""
    return [
        f"{where} sets serial-port-enable: the serial console is reachable from anywhere"
        for where, metadata in metadata_scopes(resource_type, props)
        if metadata_flag(metadata, "serial-port-enable")
    ]


def instance_no_ip_forwarding(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """CIS GCP 4.6."""
    vm = vm_of(resource_type, props)
    if vm is None or vm.ip_forwarding is None:
        return []
    return [f"{vm.ip_forwarding} is true: the VM can route traffic that is not its own"]


def instance_shielded_vm(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 4.8: vTPM and integrity monitoring stay on (they default to on). Secure Boot is
    left to the team: it refuses unsigned kernel modules, such as some GPU drivers."""
    vm = vm_of(resource_type, props)
    if vm is None:
        return []
    return [
        f"{vm.shielded_path}.{key} is false"
        for key in ("enableVtpm", "enableIntegrityMonitoring")
        if vm.shielded.get(key) is False
    ]
