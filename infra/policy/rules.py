"""The platform's guardrails, in order: ``RULES``.

Each entry names a rule, says what it requires and how to fix a violation, marks it advisory
(``mandatory=False``), prod-only or closed-egress-only, and points at its check in one of the
``*_checks`` modules (storage, IAM, credentials, network, egress, VMs, cost). ``policies.py``
packs the rules as CrossGuard policies and ``evaluate.py`` runs them offline, both in this order;
what a rule and a check are is in ``rule_types.py``.
"""

from __future__ import annotations

from infra.policy.checks.cost import budget_present, labels_present
from infra.policy.checks.credentials import (
    kms_key_rotation,
    no_default_compute_identity,
    no_secret_values_in_state,
    no_service_account_keys,
    trainer_not_default_compute,
)
from infra.policy.checks.egress import (
    default_route_denied,
    no_cloud_nat,
    no_external_address,
    no_internet_egress_allow,
    peering_default_route_removed,
)
from infra.policy.checks.iam import (
    audit_logs_no_exemptions,
    budget_canceler_only_cancels,
    controller_only_walks_and_cancels,
    no_admin_roles_on_service_accounts,
    no_primitive_roles,
    no_project_wide_admin,
    no_project_wide_escalating_custom_roles,
    no_project_wide_privilege_escalation,
    no_public_principals,
)
from infra.policy.checks.network import (
    dns_dnssec,
    network_custom_mode,
    network_dns_logging,
    no_internet_ingress,
    ranges_avoid_vertex_reserved,
    subnet_flow_logs,
    subnet_private_google_access,
)
from infra.policy.checks.storage import (
    bucket_cmek,
    bucket_public_access_prevention,
    bucket_uniform_access,
    no_public_acls,
    registry_cmek,
    registry_immutable_tags,
    tensorboard_cmek,
)
from infra.policy.checks.vms import (
    instance_block_project_ssh_keys,
    instance_no_external_ip,
    instance_no_ip_forwarding,
    instance_no_serial_port,
    instance_not_default_service_account,
    instance_os_login,
    instance_shielded_vm,
)
from infra.policy.checks.warm_pools import (
    warm_pool_cmek,
    warm_pool_labels,
    warm_pool_private,
    warm_pool_replica_ceiling,
)
from infra.policy.rule_types import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        "bucket-uniform-access",
        "Buckets use uniform bucket-level access.",
        "set uniform_bucket_level_access=True on the bucket",
        resource_check=bucket_uniform_access,
    ),
    Rule(
        "bucket-public-access-prevention",
        "Buckets enforce public access prevention.",
        'set public_access_prevention="enforced" on the bucket',
        resource_check=bucket_public_access_prevention,
    ),
    Rule(
        "no-public-principals",
        "No IAM grant to allUsers or allAuthenticatedUsers.",
        "grant the role to a named service account or group instead",
        resource_check=no_public_principals,
    ),
    Rule(
        "no-primitive-roles",
        "No primitive roles (owner, editor, viewer).",
        "grant a predefined role scoped to the task (e.g. roles/storage.objectViewer)",
        resource_check=no_primitive_roles,
    ),
    Rule(
        "no-project-wide-admin",
        "No project-wide storage.admin, aiplatform.admin or cloudkms.admin.",
        "grant the role on the bucket, key or resource that needs it, not on the project",
        resource_check=no_project_wide_admin,
    ),
    Rule(
        "no-project-wide-privilege-escalation",
        "No project-wide role that can act as service accounts, mint their credentials or "
        "change IAM (serviceAccountUser, serviceAccountTokenCreator, projectIamAdmin...).",
        "grant it on the one service account (or resource) that needs it, not on the project",
        resource_check=no_project_wide_privilege_escalation,
    ),
    Rule(
        "no-project-wide-escalating-custom-roles",
        "No project-wide custom role carrying an escalation permission (actAs, getAccessToken, "
        "setIamPolicy...).",
        "drop those permissions from the role, or grant it on the one resource that needs it",
        stack_check=no_project_wide_escalating_custom_roles,
    ),
    Rule(
        "budget-canceler-only-cancels",
        "A team budget's cancel function holds only the permissions to list and cancel Vertex "
        "jobs and studies.",
        "keep the role's permissions to infra.config.CANCEL_PERMISSIONS",
        resource_check=budget_canceler_only_cancels,
    ),
    Rule(
        "controller-only-walks-and-cancels",
        "The stack's controller holds only the permissions to create, get, list and cancel "
        "Vertex jobs and studies.",
        "keep the role's permissions to infra.config.CONTROLLER_PERMISSIONS",
        resource_check=controller_only_walks_and_cancels,
    ),
    Rule(
        "no-admin-roles-on-service-accounts",
        "No service account holds an admin role on the whole project.",
        "grant the account the narrow role it needs (a user or viewer role, or on one resource)",
        resource_check=no_admin_roles_on_service_accounts,
    ),
    Rule(
        "no-public-acls",
        "No legacy bucket or object ACL grants allUsers or allAuthenticatedUsers.",
        "drop the ACL: keep uniform bucket-level access and grant IAM roles to named principals",
        resource_check=no_public_acls,
    ),
    Rule(
        "audit-logs-no-exemptions",
        "Cloud Audit Logs exempt no one.",
        "remove exempted_members from the audit log config",
        resource_check=audit_logs_no_exemptions,
    ),
    Rule(
        "no-service-account-keys",
        "No service account keys, HMAC keys or API keys.",
        "use the attached service account or Workload Identity Federation instead of a key",
        resource_check=no_service_account_keys,
    ),
    Rule(
        "no-default-compute-identity",
        "Nothing uses or grants to the Compute Engine default service account.",
        "use the stack's dedicated trainer / launcher service accounts",
        resource_check=no_default_compute_identity,
    ),
    Rule(
        "jobs-not-default-compute",
        "Jobs do not run as the Compute Engine default service account.",
        "export a dedicated service account as platform.trainer_service_account",
        stack_check=trainer_not_default_compute,
    ),
    Rule(
        "subnet-private-google-access",
        "Subnets have private Google access.",
        "set private_ip_google_access=True on the subnetwork",
        resource_check=subnet_private_google_access,
    ),
    Rule(
        "ranges-avoid-vertex-reserved",
        "Network ranges do not overlap 172.16.0.0/16 (reserved by Vertex AI training).",
        "pick ranges outside 172.16.0.0/16, e.g. in 10.0.0.0/8",
        resource_check=ranges_avoid_vertex_reserved,
    ),
    Rule(
        "no-internet-ingress",
        "No firewall lets the internet reach SSH (22), RDP (3389) or every port.",
        "allow only the ranges that need it (e.g. IAP TCP forwarding 35.235.240.0/20 for SSH)",
        resource_check=no_internet_ingress,
    ),
    Rule(
        "network-custom-mode",
        "Networks are custom mode (no auto-created subnet in every region).",
        "set auto_create_subnetworks=False and declare the subnets the stack needs",
        resource_check=network_custom_mode,
    ),
    Rule(
        "network-dns-logging",
        "Every network has a Cloud DNS policy that logs its queries.",
        "declare gcp.dns.Policy(enable_logging=True, networks=[{'network_url': network.id}]) "
        "in the network's project (or set enable_logging=True on its existing policy)",
        stack_check=network_dns_logging,
    ),
    Rule(
        "dns-dnssec",
        "Public DNS zones sign with DNSSEC, never with RSASHA1.",
        "set dnssec_config={'state': 'on'} (RSASHA256 keys by default) on the managed zone",
        resource_check=dns_dnssec,
    ),
    Rule(
        "egress-none-no-nat",
        "With network.egress none, no Cloud NAT.",
        "remove the RouterNat: jobs of this stack reach Google APIs and the registries through "
        "Private Google Access, and nothing else",
        egress_none_only=True,
        resource_check=no_cloud_nat,
    ),
    Rule(
        "egress-none-no-external-address",
        "With network.egress none, no external IP address is reserved.",
        'set address_type="INTERNAL" (and a subnetwork) on the address, or remove it',
        egress_none_only=True,
        resource_check=no_external_address,
    ),
    Rule(
        "egress-none-no-internet-egress-allow",
        "With network.egress none, no egress firewall rule allows 0.0.0.0/0 or another "
        "internet-wide destination.",
        "allow only the VPC's own ranges and the Google APIs VIP (199.36.153.8/30, or "
        "199.36.153.4/30 inside a VPC-SC perimeter) on tcp:443",
        egress_none_only=True,
        resource_check=no_internet_egress_allow,
    ),
    Rule(
        "egress-none-default-route-denied",
        "With network.egress none, a default route to the internet gateway is shadowed by an "
        "egress deny of 0.0.0.0/0 that ranks ahead of every allow.",
        "create the network with delete_default_routes_on_create=True and drop 0.0.0.0/0 "
        "routes, or add an EGRESS deny of all protocols to 0.0.0.0/0 at priority 65534",
        egress_none_only=True,
        stack_check=default_route_denied,
    ),
    Rule(
        "egress-none-peering-closed",
        "With network.egress none, a Vertex peering has VPC Service Controls for peerings on "
        "(no default route in the network Vertex runs jobs in).",
        "declare servicenetworking.VpcServiceControls(network=<the VPC name>, service="
        '"servicenetworking.googleapis.com", enabled=True) '
        "(gcloud services vpc-peerings enable-vpc-service-controls)",
        egress_none_only=True,
        stack_check=peering_default_route_removed,
    ),
    Rule(
        "instance-no-external-ip",
        "VMs (instances, templates, Workbench) have no external IP address.",
        "drop access_configs (Workbench: disable_public_ip=True); reach the internet through "
        "Cloud NAT and the VM through IAP",
        resource_check=instance_no_external_ip,
    ),
    Rule(
        "instance-not-default-service-account",
        "VMs run as a dedicated service account, not the implied Compute Engine default.",
        "set service_account={'email': <a dedicated account>, 'scopes': ['cloud-platform']}",
        resource_check=instance_not_default_service_account,
    ),
    Rule(
        "instance-block-project-ssh-keys",
        "VMs block project-wide SSH keys (or use OS Login).",
        "set metadata {'block-project-ssh-keys': 'true'} or {'enable-oslogin': 'TRUE'}",
        resource_check=instance_block_project_ssh_keys,
    ),
    Rule(
        "instance-os-login",
        "Nothing turns OS Login off.",
        "remove enable-oslogin=FALSE from the metadata (set it to TRUE on the project)",
        resource_check=instance_os_login,
    ),
    Rule(
        "instance-no-serial-port",
        "No VM or project enables the interactive serial console.",
        "remove serial-port-enable from the metadata",
        resource_check=instance_no_serial_port,
    ),
    Rule(
        "instance-no-ip-forwarding",
        "VMs do not forward IP packets.",
        "set can_ip_forward=False (Workbench: enable_ip_forwarding=False)",
        resource_check=instance_no_ip_forwarding,
    ),
    Rule(
        "instance-shielded-vm",
        "Shielded VM vTPM and integrity monitoring stay on.",
        "drop enable_vtpm=False / enable_integrity_monitoring=False from shielded_instance_config",
        resource_check=instance_shielded_vm,
    ),
    Rule(
        "persistent-resource-private",
        "Persistent resources (warm pools) are joined to the stack's network: the peered VPC or "
        "a PSC interface, as its jobs are.",
        "set network (peering) or psc_interface_config={'network_attachment': ...}, as "
        "infra.components.capacity.persistent_resources does",
        resource_check=warm_pool_private,
    ),
    Rule(
        "persistent-resource-replica-ceiling",
        "No pool of a persistent resource may hold more VMs than infra.config."
        "MAX_WARM_POOL_REPLICAS: they are billed by the hour, busy or idle.",
        "lower the pool's replica_count or autoscaling max_replica_count, or raise the ceiling "
        "in infra/config.py in review",
        resource_check=warm_pool_replica_ceiling,
    ),
    Rule(
        "persistent-resource-labels",
        "Persistent resources carry every label the rest of the stack carries (team, "
        "cost-center...): the bill shows the resource, never the jobs on it.",
        "pass the platform labels (labels=cfg.labels | the resource's own) to the resource",
        stack_check=warm_pool_labels,
    ),
    Rule(
        "no-secret-values-in-state",
        "No secret values in Pulumi state (no SecretVersion resources).",
        "declare the secret only and add versions with `gcloud secrets versions add`",
        resource_check=no_secret_values_in_state,
    ),
    Rule(
        "labels-present",
        "Every resource that takes labels has them, with the required keys.",
        "pass the platform labels (labels=cfg.labels) to the resource",
        mandatory=False,
        resource_check=labels_present,
    ),
    Rule(
        "kms-key-rotation",
        "KMS keys rotate at least every 90 days.",
        'set rotation_period (e.g. "7776000s", 90 days) on the crypto key',
        mandatory=False,
        resource_check=kms_key_rotation,
    ),
    Rule(
        "prod-subnet-flow-logs",
        "In prod, subnets have VPC flow logs.",
        "pass log_config={...} to the subnetwork (flow_logs in the prod config)",
        prod_only=True,
        resource_check=subnet_flow_logs,
    ),
    Rule(
        "prod-bucket-cmek",
        "In prod, buckets are encrypted with a customer-managed key.",
        "set encryption={'default_kms_key_name': key.id} (cmek: true in the prod config)",
        prod_only=True,
        resource_check=bucket_cmek,
    ),
    Rule(
        "prod-registry-cmek",
        "In prod, Artifact Registry repositories are encrypted with a customer-managed key.",
        "re-create the repository with kms_key_name=key.id, a key in its location (cmek: true "
        "in the prod config); the key cannot be added to an existing repository",
        prod_only=True,
        resource_check=registry_cmek,
    ),
    Rule(
        "prod-tensorboard-cmek",
        "In prod, Vertex TensorBoards are encrypted with a customer-managed key.",
        "set encryption_spec={'kms_key_name': key.id}, a key in the TensorBoard's region "
        "(cmek: true in the prod config)",
        prod_only=True,
        resource_check=tensorboard_cmek,
    ),
    Rule(
        "prod-persistent-resource-cmek",
        "In prod, persistent resources are encrypted with a customer-managed key.",
        "set encryption_spec={'kms_key_name': key.id}, a key in the resource's region (cmek: "
        "true in the prod config)",
        prod_only=True,
        resource_check=warm_pool_cmek,
    ),
    Rule(
        "prod-registry-immutable-tags",
        "In prod, Docker repositories have immutable tags.",
        "set docker_config={'immutable_tags': True} on the repository",
        prod_only=True,
        resource_check=registry_immutable_tags,
    ),
    Rule(
        "prod-budget",
        "In prod, the stack declares a billing budget.",
        "configure budget (billing account, amount, thresholds) in the prod config",
        prod_only=True,
        stack_check=budget_present,
    ),
)
