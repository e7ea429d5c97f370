"""Platform guardrails: every rule passes a compliant resource and reports a violating one."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from infra.policy.evaluate import PolicySubject, evaluate, mandatory_violations
from infra.policy.iam import grants_of
from infra.policy.labels import takes_labels
from infra.policy.rule_types import Rule, RuleContext, StackResource
from infra.policy.rules import RULES
from infra.policy.values import UNKNOWN

PROD = RuleContext(environment="prod")
LABELS = {"environment": "prod", "team": "ml-platform"}
SA = "serviceAccount:vtx-trainer@acme.iam.gserviceaccount.com"
DEFAULT_SA = "123456789012-compute@developer.gserviceaccount.com"

GOOD_BUCKET = {
    "name": "acme-prod-data",
    "uniformBucketLevelAccess": True,
    "publicAccessPrevention": "enforced",
    "encryption": {"defaultKmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
    "labels": LABELS,
}
GOOD_SUBNET = {
    "ipCidrRange": "10.10.0.0/20",
    "privateIpGoogleAccess": True,
    "logConfig": {"aggregationInterval": "INTERVAL_5_SEC", "flowSampling": 0.5},
}
KEY = "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"
GOOD_REPO = {
    "format": "DOCKER",
    "repositoryId": "trainer",
    "dockerConfig": {"immutableTags": True},
    "kmsKeyName": KEY,
    "labels": LABELS,
}
REPOSITORY = "gcp:artifactregistry/repository:Repository"
TENSORBOARD = "gcp:vertex/aiTensorboard:AiTensorboard"
GOOD_TENSORBOARD = {"displayName": "tb", "encryptionSpec": {"kmsKeyName": KEY}, "labels": LABELS}
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
AGENT = "serviceAccount:service-123456789012@gcp-sa-aiplatform.iam.gserviceaccount.com"
FIREWALL = "gcp:compute/firewall:Firewall"
POLICY_RULE = "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule"
INSTANCE = "gcp:compute/instance:Instance"
WORKBENCH = "gcp:workbench/instance:Instance"
# SSH through IAP TCP forwarding: what CIS GCP 3.6 recommends instead of SSH from anywhere.
IAP_SSH = {
    "direction": "INGRESS",
    "allows": [{"protocol": "tcp", "ports": ["22"]}],
    "sourceRanges": ["35.235.240.0/20"],
}
GOOD_INSTANCE = {
    "machineType": "n2-standard-4",
    "networkInterfaces": [{"subnetwork": "training"}],
    "serviceAccount": {"email": SA.split(":", 1)[1], "scopes": ["cloud-platform"]},
    "metadata": {"block-project-ssh-keys": "true"},
    "shieldedInstanceConfig": {"enableSecureBoot": True},
    "labels": LABELS,
}
GOOD_WORKBENCH = {
    "location": "europe-west4-a",
    "gceSetup": {
        "disablePublicIp": True,
        "serviceAccounts": [{"email": SA.split(":", 1)[1]}],
        "metadata": {"enable-oslogin": "TRUE"},
    },
    "labels": LABELS,
}
FIREWALL = "gcp:compute/firewall:Firewall"
GOOGLE_APIS_EGRESS = {
    "network": "projects/p/global/networks/vpc",
    "direction": "EGRESS",
    "priority": 1000,
    "destinationRanges": ["199.36.153.8/30"],
    "allows": [{"protocol": "tcp", "ports": ["443"]}],
}
PUBLIC_ZONE = {"dnsName": "ml.acme.com.", "dnssecConfig": {"state": "on"}, "labels": LABELS}


def rule(name: str) -> Rule:
    return next(r for r in RULES if r.name == name)


def check(name: str, resource_type: str, props: dict[str, Any], ctx: RuleContext = PROD):
    found = rule(name).resource_check
    assert found is not None
    return found(resource_type, props, ctx)


CANCELER = {
    "roleId": "acme_vtx_prod_budget_canceler",
    "permissions": ["aiplatform.customJobs.list", "aiplatform.customJobs.cancel"],
}

CONTROLLER = {
    "roleId": "acme_vtx_prod_controller",
    "permissions": ["aiplatform.customJobs.create", "aiplatform.customJobs.cancel"],
}

# (rule, type token, compliant inputs, violating inputs, words the violation must contain)
CASES = [
    (
        "controller-only-walks-and-cancels",
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        CONTROLLER,
        {**CONTROLLER, "permissions": [*CONTROLLER["permissions"], "storage.buckets.delete"]},
        "storage.buckets.delete beyond creating, watching and cancelling",
    ),
    (
        "budget-canceler-only-cancels",
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        CANCELER,
        {**CANCELER, "permissions": [*CANCELER["permissions"], "aiplatform.customJobs.create"]},
        "aiplatform.customJobs.create beyond listing and cancelling",
    ),
    (
        "bucket-uniform-access",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {**GOOD_BUCKET, "uniformBucketLevelAccess": False},
        "uniformBucketLevelAccess",
    ),
    (
        "bucket-public-access-prevention",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {**GOOD_BUCKET, "publicAccessPrevention": "inherited"},
        "'inherited'",
    ),
    (
        "no-public-principals",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.objectViewer", "member": SA},
        {"bucket": "b", "role": "roles/storage.objectViewer", "member": "allUsers"},
        "allUsers",
    ),
    (
        "no-public-principals",
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
        {"bucket": "b", "policyData": json.dumps({"bindings": []})},
        {
            "bucket": "b",
            "policyData": json.dumps(
                {
                    "bindings": [
                        {"role": "roles/storage.objectViewer", "members": ["allAuthenticatedUsers"]}
                    ]
                }
            ),
        },
        "allAuthenticatedUsers",
    ),
    (
        "no-primitive-roles",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/logging.logWriter", "member": SA},
        {"project": "p", "role": "roles/editor", "member": SA},
        "roles/editor",
    ),
    (
        "no-primitive-roles",
        "gcp:secretmanager/secretIamBinding:SecretIamBinding",
        {"secretId": "s", "role": "roles/secretmanager.secretAccessor", "members": [SA]},
        {"secretId": "s", "role": "roles/viewer", "members": [SA]},
        "roles/viewer",
    ),
    (
        "no-project-wide-admin",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.admin", "member": SA},
        {"project": "p", "role": "roles/storage.admin", "member": SA},
        "whole project p",
    ),
    (
        "no-project-wide-admin",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/cloudkms.cryptoKeyEncrypterDecrypter", "member": SA},
        {"project": "p", "role": "roles/cloudkms.admin", "member": SA},
        "cloudkms.admin",
    ),
    (
        "no-project-wide-admin",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/aiplatform.user", "member": SA},
        {"project": "p", "role": "roles/aiplatform.admin", "member": SA},
        "aiplatform.admin",
    ),
    (
        "no-default-compute-identity",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.objectAdmin", "member": SA},
        {
            "bucket": "b",
            "role": "roles/storage.objectAdmin",
            "member": f"serviceAccount:{DEFAULT_SA}",
        },
        "member names the Compute Engine default account",
    ),
    (
        "subnet-private-google-access",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {**GOOD_SUBNET, "privateIpGoogleAccess": False},
        "privateIpGoogleAccess",
    ),
    (
        "ranges-avoid-vertex-reserved",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {
            **GOOD_SUBNET,
            "secondaryIpRanges": [{"rangeName": "pods", "ipCidrRange": "172.16.4.0/22"}],
        },
        "secondaryIpRanges[0].ipCidrRange 172.16.4.0/22 overlaps 172.16.0.0/16",
    ),
    (
        "ranges-avoid-vertex-reserved",
        "gcp:compute/globalAddress:GlobalAddress",
        {"purpose": "VPC_PEERING", "address": "10.8.0.0", "prefixLength": 16.0, "labels": LABELS},
        {
            "purpose": "VPC_PEERING",
            "address": "172.16.32.0",
            "prefixLength": 20.0,
            "labels": LABELS,
        },
        "172.16.32.0/20 overlaps",
    ),
    (
        "no-secret-values-in-state",
        "gcp:secretmanager/secret:Secret",
        {"secretId": "hf-token", "replication": {"auto": {}}, "labels": LABELS},
        {"secret": "hf-token", "secretData": "[secret]"},
        "SecretVersion",
    ),
    (
        "labels-present",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {k: v for k, v in GOOD_BUCKET.items() if k != "labels"},
        "no labels",
    ),
    (
        "labels-present",
        "gcp:secretmanager/secret:Secret",
        {"secretId": "s", "labels": LABELS},
        {"secretId": "s", "labels": {"team": "ml-platform"}},
        "lack environment",
    ),
    (
        "egress-none-no-nat",
        "gcp:compute/router:Router",
        {"name": "r", "network": "vpc"},
        {"name": "nat", "router": "r", "natIpAllocateOption": "AUTO_ONLY"},
        "Cloud NAT nat",
    ),
    (
        "egress-none-no-external-address",
        "gcp:compute/address:Address",
        {"name": "a", "addressType": "INTERNAL", "subnetwork": "s"},
        {"name": "a"},
        "no addressType (EXTERNAL by default)",
    ),
    (
        "egress-none-no-external-address",
        "gcp:compute/globalAddress:GlobalAddress",
        {"name": "peering", "addressType": "INTERNAL", "purpose": "VPC_PEERING"},
        {"name": "lb", "addressType": "EXTERNAL"},
        "addressType EXTERNAL",
    ),
    (
        "egress-none-no-internet-egress-allow",
        FIREWALL,
        GOOGLE_APIS_EGRESS,
        {**GOOGLE_APIS_EGRESS, "destinationRanges": ["199.36.153.8/30", "0.0.0.0/0"]},
        "lets traffic out to 199.36.153.8/30, 0.0.0.0/0",
    ),
    (
        "egress-none-no-internet-egress-allow",
        FIREWALL,
        {**GOOGLE_APIS_EGRESS, "allows": None, "denies": [{"protocol": "all"}]},
        {**GOOGLE_APIS_EGRESS, "destinationRanges": None},
        "0.0.0.0/0 (no destination given)",
    ),
    (
        "egress-none-no-internet-egress-allow",
        "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
        {"direction": "EGRESS", "action": "allow", "match": {"destIpRanges": ["10.0.0.0/8"]}},
        {"direction": "EGRESS", "action": "allow", "match": {"destFqdns": ["pypi.org"]}},
        "fqdn pypi.org",
    ),
    (
        "kms-key-rotation",
        "gcp:kms/cryptoKey:CryptoKey",
        {"keyRing": "r", "rotationPeriod": "7776000s", "labels": LABELS},
        {"keyRing": "r", "labels": LABELS},
        "rotationPeriod",
    ),
    (
        "prod-subnet-flow-logs",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {k: v for k, v in GOOD_SUBNET.items() if k != "logConfig"},
        "flow logs are off",
    ),
    (
        "prod-bucket-cmek",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {k: v for k, v in GOOD_BUCKET.items() if k != "encryption"},
        "defaultKmsKeyName",
    ),
    (
        "prod-registry-cmek",
        REPOSITORY,
        GOOD_REPO,
        {k: v for k, v in GOOD_REPO.items() if k != "kmsKeyName"},
        "no kmsKeyName",
    ),
    (
        "prod-registry-cmek",
        REPOSITORY,
        {**GOOD_REPO, "format": "PYTHON", "dockerConfig": None},
        {**GOOD_REPO, "format": "PYTHON", "kmsKeyName": ""},
        "Google-managed keys",
    ),
    (
        "prod-tensorboard-cmek",
        TENSORBOARD,
        GOOD_TENSORBOARD,
        {k: v for k, v in GOOD_TENSORBOARD.items() if k != "encryptionSpec"},
        "no encryptionSpec.kmsKeyName",
    ),
    (
        "prod-tensorboard-cmek",
        TENSORBOARD,
        GOOD_TENSORBOARD,
        {**GOOD_TENSORBOARD, "encryptionSpec": {}},
        "training metrics are encrypted with Google-managed keys",
    ),
    (
        "prod-registry-immutable-tags",
        REPOSITORY,
        GOOD_REPO,
        {**GOOD_REPO, "dockerConfig": {"immutableTags": False}},
        "immutableTags",
    ),
    # --- CIS GCP Foundations Benchmark controls (infra/policy/README.md maps them) ---
    (
        "no-internet-ingress",
        FIREWALL,
        IAP_SSH,
        {**IAP_SSH, "sourceRanges": ["0.0.0.0/0"]},
        "allows[0] allows SSH (22) from 0.0.0.0/0",
    ),
    (
        "no-internet-ingress",
        FIREWALL,
        # the stack's own last-resort rule: deny everything from anywhere
        {"direction": "INGRESS", "denies": [{"protocol": "all"}], "sourceRanges": ["0.0.0.0/0"]},
        {"direction": "INGRESS", "allows": [{"protocol": "all"}], "sourceRanges": ["0.0.0.0/0"]},
        "allows every port from 0.0.0.0/0",
    ),
    (
        "no-internet-ingress",
        FIREWALL,
        # a public HTTPS port is not remote administration
        {"allows": [{"protocol": "tcp", "ports": ["443"]}], "sourceRanges": ["0.0.0.0/0"]},
        {"allows": [{"protocol": "tcp", "ports": ["3000-4000"]}], "sourceRanges": ["0.0.0.0/0"]},
        "RDP (3389)",
    ),
    (
        "no-internet-ingress",
        POLICY_RULE,
        {
            "action": "allow",
            "direction": "INGRESS",
            "match": {"srcIpRanges": ["10.0.0.0/8"], "layer4Configs": [{"ipProtocol": "all"}]},
        },
        {
            "action": "allow",
            "direction": "INGRESS",
            "match": {
                "srcIpRanges": ["::/0"],
                "layer4Configs": [{"ipProtocol": "tcp", "ports": ["3389"]}],
            },
        },
        "match.layer4Configs[0] allows RDP (3389) from ::/0",
    ),
    (
        "no-internet-ingress",
        "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules",
        {
            "rules": [
                {
                    "action": "deny",
                    "direction": "INGRESS",
                    "match": {
                        "srcIpRanges": ["0.0.0.0/0"],
                        "layer4Configs": [{"ipProtocol": "all"}],
                    },
                }
            ]
        },
        {
            "rules": [
                {
                    "action": "deny",
                    "direction": "INGRESS",
                    "match": {
                        "srcIpRanges": ["0.0.0.0/0"],
                        "layer4Configs": [{"ipProtocol": "all"}],
                    },
                },
                {
                    "action": "allow",
                    "direction": "INGRESS",
                    "match": {
                        "srcIpRanges": ["0.0.0.0/0"],
                        "layer4Configs": [{"ipProtocol": "tcp"}],
                    },
                },
            ]
        },
        "rules[1].match.layer4Configs[0] allows every tcp port",
    ),
    (
        "no-public-acls",
        "gcp:storage/bucketACL:BucketACL",
        {"bucket": "b", "roleEntities": ["OWNER:project-owners-123", "READER:group-ml@acme.com"]},
        {"bucket": "b", "roleEntities": ["OWNER:project-owners-123", "READER:allUsers"]},
        "roleEntities[1] READER:allUsers",
    ),
    (
        "no-public-acls",
        "gcp:storage/bucketACL:BucketACL",
        {"bucket": "b", "predefinedAcl": "projectPrivate"},
        {"bucket": "b", "predefinedAcl": "publicRead"},
        "predefinedAcl publicRead",
    ),
    (
        "no-public-acls",
        "gcp:storage/defaultObjectACL:DefaultObjectACL",
        {"bucket": "b", "roleEntities": ["OWNER:project-owners-123"]},
        {"bucket": "b", "roleEntities": ["READER:allAuthenticatedUsers"]},
        "allAuthenticatedUsers",
    ),
    (
        "no-public-acls",
        "gcp:storage/objectACL:ObjectACL",
        {"bucket": "b", "object": "o", "predefinedAcl": "private"},
        {"bucket": "b", "object": "o", "predefinedAcl": "authenticatedRead"},
        "predefinedAcl authenticatedRead",
    ),
    (
        "no-public-acls",
        "gcp:storage/bucketAccessControl:BucketAccessControl",
        {"bucket": "b", "entity": "group-ml@acme.com", "role": "READER"},
        {"bucket": "b", "entity": "allUsers", "role": "READER"},
        "entity allUsers",
    ),
    (
        "no-public-acls",
        "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl",
        {"bucket": "b", "entity": "group-ml@acme.com", "role": "READER"},
        {"bucket": "b", "entity": "allAuthenticatedUsers", "role": "READER"},
        "entity allAuthenticatedUsers",
    ),
    (
        "no-public-acls",
        "gcp:storage/objectAccessControl:ObjectAccessControl",
        {"bucket": "b", "object": "o", "entity": "group-ml@acme.com", "role": "READER"},
        {"bucket": "b", "object": "o", "entity": "allUsers", "role": "READER"},
        "entity allUsers",
    ),
    (
        "no-project-wide-privilege-escalation",
        SA_MEMBER,
        {"serviceAccountId": "trainer", "role": "roles/iam.serviceAccountUser", "member": SA},
        {"project": "p", "role": "roles/iam.serviceAccountUser", "member": SA},
        "iam.serviceAccountUser",
    ),
    (
        "no-project-wide-privilege-escalation",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/aiplatform.user", "member": SA},
        {"project": "p", "role": "roles/resourcemanager.projectIamAdmin", "member": SA},
        "roles/resourcemanager.projectIamAdmin",
    ),
    (
        "no-project-wide-privilege-escalation",
        "gcp:projects/iAMBinding:IAMBinding",
        {"project": "p", "role": "roles/logging.logWriter", "members": [SA]},
        {"project": "p", "role": "roles/iam.serviceAccountTokenCreator", "members": [SA]},
        "roles/iam.serviceAccountTokenCreator",
    ),
    (
        "no-project-wide-privilege-escalation",
        "gcp:organizations/iAMMember:IAMMember",
        {"orgId": "1", "role": "roles/resourcemanager.organizationViewer", "member": SA},
        {"orgId": "1", "role": "roles/iam.serviceAccountKeyAdmin", "member": SA},
        "whole orgId 1",
    ),
    (
        "no-project-wide-privilege-escalation",
        "gcp:projects/iAMPolicy:IAMPolicy",
        {"project": "p", "policyData": json.dumps({"bindings": []})},
        {
            "project": "p",
            "policyData": json.dumps(
                {
                    "bindings": [
                        {"role": "roles/iam.securityAdmin", "members": ["group:ops@acme.com"]}
                    ]
                }
            ),
        },
        "roles/iam.securityAdmin to group:ops@acme.com",
    ),
    (
        "no-admin-roles-on-service-accounts",
        PROJECT_MEMBER,
        # Google's own service agents are not what CIS GCP 1.5 is about
        {"project": "p", "role": "roles/compute.networkAdmin", "member": AGENT},
        {"project": "p", "role": "roles/compute.networkAdmin", "member": SA},
        "admin role roles/compute.networkAdmin to service account",
    ),
    (
        "no-admin-roles-on-service-accounts",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/storage.objectViewer", "member": SA},
        {"project": "p", "role": "roles/storage.objectAdmin", "member": SA},
        "roles/storage.objectAdmin",
    ),
    (
        "audit-logs-no-exemptions",
        "gcp:projects/iAMAuditConfig:IAMAuditConfig",
        {
            "project": "p",
            "service": "allServices",
            "auditLogConfigs": [{"logType": "ADMIN_READ"}, {"logType": "DATA_READ"}],
        },
        {
            "project": "p",
            "service": "allServices",
            "auditLogConfigs": [{"logType": "DATA_READ", "exemptedMembers": ["user:a@acme.com"]}],
        },
        "DATA_READ audit logs of allServices exempt user:a@acme.com",
    ),
    (
        "audit-logs-no-exemptions",
        "gcp:projects/iAMPolicy:IAMPolicy",
        {"project": "p", "policyData": json.dumps({"bindings": [], "auditConfigs": []})},
        {
            "project": "p",
            "policyData": json.dumps(
                {
                    "auditConfigs": [
                        {
                            "service": "storage.googleapis.com",
                            "auditLogConfigs": [{"logType": "DATA_WRITE", "exemptedMembers": [SA]}],
                        }
                    ]
                }
            ),
        },
        "DATA_WRITE audit logs of storage.googleapis.com exempt",
    ),
    (
        "network-custom-mode",
        "gcp:compute/network:Network",
        {"name": "vpc", "autoCreateSubnetworks": False},
        {"name": "vpc"},  # pulumi-gcp's default is an auto-mode network
        "autoCreateSubnetworks is not false",
    ),
    (
        "dns-dnssec",
        "gcp:dns/managedZone:ManagedZone",
        PUBLIC_ZONE,
        {**PUBLIC_ZONE, "dnssecConfig": {"state": "off"}},
        "dnssecConfig.state is 'off'",
    ),
    (
        "dns-dnssec",
        "gcp:dns/managedZone:ManagedZone",
        # private zones are not served to the internet: no DNSSEC needed
        {"dnsName": "internal.", "visibility": "private", "labels": LABELS},
        {
            **PUBLIC_ZONE,
            "dnssecConfig": {
                "state": "on",
                "defaultKeySpecs": [{"algorithm": "rsasha1", "keyType": "keySigning"}],
            },
        },
        "defaultKeySpecs[0] signs keySigning with RSASHA1",
    ),
    (
        "instance-no-external-ip",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "networkInterfaces": [{"subnetwork": "s", "accessConfigs": [{}]}]},
        "networkInterfaces[0].accessConfigs gives the VM a public IP address",
    ),
    (
        "instance-no-external-ip",
        "gcp:compute/instanceTemplate:InstanceTemplate",
        GOOD_INSTANCE,
        {
            **GOOD_INSTANCE,
            "networkInterfaces": [
                {"subnetwork": "s", "ipv6AccessConfigs": [{"networkTier": "PREMIUM"}]}
            ],
        },
        "networkInterfaces[0].ipv6AccessConfigs",
    ),
    (
        "instance-no-external-ip",
        WORKBENCH,
        GOOD_WORKBENCH,
        {"location": "europe-west4-a", "labels": LABELS},  # Workbench's default: a public IP
        "gceSetup.disablePublicIp",
    ),
    (
        "instance-not-default-service-account",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "serviceAccount": {"scopes": ["cloud-platform"]}},
        "serviceAccount.email is not set",
    ),
    (
        "instance-not-default-service-account",
        WORKBENCH,
        GOOD_WORKBENCH,
        {**GOOD_WORKBENCH, "gceSetup": {"disablePublicIp": True}},
        "gceSetup.serviceAccounts is not set",
    ),
    (
        "instance-block-project-ssh-keys",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "metadata": {"block-project-ssh-keys": "false"}},
        "metadata does not set block-project-ssh-keys",
    ),
    (
        "instance-block-project-ssh-keys",
        "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
        {**GOOD_INSTANCE, "metadata": {"enable-oslogin": "TRUE"}},  # OS Login ignores the keys
        {k: v for k, v in GOOD_INSTANCE.items() if k != "metadata"},
        "block-project-ssh-keys",
    ),
    (
        "instance-os-login",
        INSTANCE,
        {**GOOD_INSTANCE, "metadata": {"enable-oslogin": "TRUE"}},
        {**GOOD_INSTANCE, "metadata": {"enable-oslogin": "FALSE"}},
        "metadata sets enable-oslogin false",
    ),
    (
        "instance-os-login",
        "gcp:compute/projectMetadataItem:ProjectMetadataItem",
        {"key": "enable-oslogin", "value": "TRUE"},
        {"key": "enable-oslogin", "value": "FALSE"},
        "project metadata sets enable-oslogin false",
    ),
    (
        "instance-no-serial-port",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "metadata": {"serial-port-enable": "TRUE"}},
        "metadata sets serial-port-enable",
    ),
    (
        "instance-no-serial-port",
        "gcp:compute/projectMetadata:ProjectMetadata",
        {"metadata": {"enable-oslogin": "TRUE"}},
        {"metadata": {"enable-oslogin": "TRUE", "serial-port-enable": "1"}},
        "project metadata sets serial-port-enable",
    ),
    (
        "instance-no-ip-forwarding",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "canIpForward": True},
        "canIpForward is true",
    ),
    (
        "instance-no-ip-forwarding",
        WORKBENCH,
        GOOD_WORKBENCH,
        {**GOOD_WORKBENCH, "gceSetup": {**GOOD_WORKBENCH["gceSetup"], "enableIpForwarding": True}},
        "gceSetup.enableIpForwarding is true",
    ),
    (
        "instance-shielded-vm",
        INSTANCE,
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "shieldedInstanceConfig": {"enableVtpm": False}},
        "shieldedInstanceConfig.enableVtpm is false",
    ),
    (
        "instance-shielded-vm",
        "gcp:compute/instanceTemplate:InstanceTemplate",
        GOOD_INSTANCE,
        {**GOOD_INSTANCE, "shieldedInstanceConfig": {"enableIntegrityMonitoring": False}},
        "enableIntegrityMonitoring is false",
    ),
    (
        "kms-key-rotation",
        "gcp:kms/cryptoKey:CryptoKey",
        {"keyRing": "r", "rotationPeriod": "2592000s", "labels": LABELS},
        {"keyRing": "r", "rotationPeriod": "31536000s", "labels": LABELS},
        "longer than 90 days",
    ),
]


# Cases whose violating resource is of another type than the compliant one.
BAD_TYPES = {
    ("egress-none-no-nat", "Cloud NAT nat"): "gcp:compute/routerNat:RouterNat",
    ("no-project-wide-admin", "whole project p"): PROJECT_MEMBER,
    ("no-project-wide-privilege-escalation", "iam.serviceAccountUser"): PROJECT_MEMBER,
    ("no-secret-values-in-state", "SecretVersion"): "gcp:secretmanager/secretVersion:SecretVersion",
}


@pytest.mark.parametrize(
    ("name", "resource_type", "good", "bad", "expected"),
    CASES,
    ids=[f"{c[0]}:{c[1].rsplit(':', 1)[-1]}" for c in CASES],
)
def test_resource_rule_passes_compliant_and_reports_violation(
    name: str, resource_type: str, good: dict, bad: dict, expected: str
) -> None:
    assert check(name, resource_type, good) == []
    bad_type = BAD_TYPES.get((name, expected), resource_type)
    messages = check(name, bad_type, bad)
    assert messages, f"{name} did not report {bad}"
    assert any(expected in m for m in messages), messages


def test_service_account_keys_are_refused_and_accounts_allowed() -> None:
    assert (
        check("no-service-account-keys", "gcp:serviceaccount/account:Account", {"accountId": "t"})
        == []
    )
    assert check("no-service-account-keys", "gcp:serviceaccount/key:Key", {"serviceAccountId": "t"})
    assert check(
        "no-service-account-keys", "gcp:storage/hmacKey:HmacKey", {"serviceAccountEmail": "t"}
    )
    assert check("no-service-account-keys", "gcp:projects/apiKey:ApiKey", {"displayName": "t"})


def test_remote_and_virtual_docker_repositories_need_no_immutable_tags() -> None:
    for mode in ("REMOTE_REPOSITORY", "VIRTUAL_REPOSITORY"):
        mirror = {"format": "DOCKER", "mode": mode, "labels": LABELS}
        assert check("prod-registry-immutable-tags", REPOSITORY, mirror) == []
    standard = {"format": "DOCKER", "mode": "STANDARD_REPOSITORY", "labels": LABELS}
    assert check("prod-registry-immutable-tags", REPOSITORY, standard)


def test_proxy_only_subnet_needs_neither_private_access_nor_flow_logs() -> None:
    proxy = {"ipCidrRange": "10.20.0.0/23", "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}
    assert check("subnet-private-google-access", "gcp:compute/subnetwork:Subnetwork", proxy) == []
    assert check("prod-subnet-flow-logs", "gcp:compute/subnetwork:Subnetwork", proxy) == []


def test_firewall_without_a_source_is_open_to_the_internet() -> None:
    # gcloud and the API read an ingress rule with no source at all as 0.0.0.0/0
    unsourced = {"allows": [{"protocol": "tcp", "ports": ["22"]}]}
    assert check("no-internet-ingress", FIREWALL, unsourced) == [
        "allows[0] allows SSH (22) from 0.0.0.0/0 (no source given)"
    ]
    tagged = {**unsourced, "sourceTags": ["bastion"]}
    assert check("no-internet-ingress", FIREWALL, tagged) == []


def test_internet_split_into_wide_public_ranges_is_still_the_internet() -> None:
    halves = {**IAP_SSH, "sourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]}
    (message,) = check("no-internet-ingress", FIREWALL, halves)
    assert "from 0.0.0.0/1, 128.0.0.0/1" in message
    private = {**IAP_SSH, "sourceRanges": ["10.0.0.0/8", "192.168.0.0/16", "fd00::/8"]}
    assert check("no-internet-ingress", FIREWALL, private) == []


def test_ssh_from_many_narrower_public_ranges_that_together_span_the_internet_is_caught() -> None:
    # 0.0.0.0/1 as 128 /9 blocks: no block alone is a /8, together they are half the internet.
    blocks = [str(n) for n in ipaddress.ip_network("0.0.0.0/1").subnets(new_prefix=9)]
    (message,) = check("no-internet-ingress", FIREWALL, {**IAP_SSH, "sourceRanges": blocks})
    assert message.startswith("allows[0] allows SSH (22) from 1.0.0.0/9, 1.128.0.0/9")
    sources = message.split(" from ", 1)[1].split(", ")
    # the blocks that are no part of the internet (this network, 10/8, loopback) are not named
    assert not {"0.0.0.0/9", "10.0.0.0/9", "127.0.0.0/9"} & set(sources)
    assert "126.128.0.0/9" in sources
    # Google's own ranges (IAP TCP forwarding, health checks) together stay far below a /8.
    google = {**IAP_SSH, "sourceRanges": ["35.235.240.0/20", "35.191.0.0/16", "130.211.0.0/22"]}
    assert check("no-internet-ingress", FIREWALL, google) == []
    # Overlaps count once: one /9 given twice is still a /9, narrower than the internet.
    twice = {**IAP_SSH, "sourceRanges": ["20.0.0.0/9", "20.0.0.0/9"]}
    assert check("no-internet-ingress", FIREWALL, twice) == []


def test_prod_subnet_flow_logs_sampling_nothing_are_off() -> None:
    subnet = "gcp:compute/subnetwork:Subnetwork"
    for sampling in (0, 0.0):
        off = {**GOOD_SUBNET, "logConfig": {**GOOD_SUBNET["logConfig"], "flowSampling": sampling}}
        (message,) = check("prod-subnet-flow-logs", subnet, off)
        assert "flowSampling is 0" in message
    some = {**GOOD_SUBNET, "logConfig": {**GOOD_SUBNET["logConfig"], "flowSampling": 0.1}}
    assert check("prod-subnet-flow-logs", subnet, some) == []


def test_disabled_and_egress_firewall_rules_open_nothing() -> None:
    open_ssh = {**IAP_SSH, "sourceRanges": ["0.0.0.0/0"]}
    assert check("no-internet-ingress", FIREWALL, {**open_ssh, "disabled": True}) == []
    assert check("no-internet-ingress", FIREWALL, {**open_ssh, "direction": "EGRESS"}) == []
    assert check("no-internet-ingress", FIREWALL, {**open_ssh, "sourceRanges": UNKNOWN}) == []


def test_firewall_policy_sources_given_as_countries_are_the_internet() -> None:
    by_country = {
        "action": "allow",
        "direction": "INGRESS",
        "match": {"srcRegionCodes": ["US"], "layer4Configs": [{"ipProtocol": "tcp"}]},
    }
    (message,) = check("no-internet-ingress", POLICY_RULE, by_country)
    assert "every tcp port from region US" in message
    assert check("no-internet-ingress", POLICY_RULE, {**by_country, "action": "deny"}) == []


VM_RULES = [r.name for r in RULES if r.name.startswith("instance-")]


@pytest.mark.parametrize("name", VM_RULES)
def test_instance_from_template_is_judged_only_on_what_it_sets(name: str) -> None:
    derived = {"sourceInstanceTemplate": "projects/p/global/instanceTemplates/t", "zone": "z"}
    assert check(name, "gcp:compute/instanceFromTemplate:InstanceFromTemplate", derived) == []


def test_instance_from_template_that_adds_an_external_ip_is_refused() -> None:
    derived = {
        "sourceInstanceTemplate": "projects/p/global/instanceTemplates/t",
        "networkInterfaces": [{"accessConfigs": [{}]}],
    }
    resource_type = "gcp:compute/instanceFromTemplate:InstanceFromTemplate"
    assert check("instance-no-external-ip", resource_type, derived)


@pytest.mark.parametrize("name", VM_RULES)
def test_compliant_vms_pass_every_vm_rule(name: str) -> None:
    assert check(name, INSTANCE, GOOD_INSTANCE) == []
    assert check(name, WORKBENCH, GOOD_WORKBENCH) == []


@pytest.mark.parametrize("name", VM_RULES)
def test_vm_settings_unknown_at_preview_are_not_violations(name: str) -> None:
    unknown = {**GOOD_INSTANCE, "serviceAccount": {"email": UNKNOWN}, "metadata": UNKNOWN}
    assert check(name, INSTANCE, unknown) == []
    assert check(name, WORKBENCH, {"location": "l", "gceSetup": UNKNOWN}) == []
    setup = {**GOOD_WORKBENCH["gceSetup"], "metadata": UNKNOWN}
    assert check(name, WORKBENCH, {**GOOD_WORKBENCH, "gceSetup": setup}) == []


def test_escalating_custom_role_is_refused_project_wide_only() -> None:
    escalate = rule("no-project-wide-escalating-custom-roles").stack_check
    assert escalate is not None
    deployer = StackResource(
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        "deployer",
        "urn:role",
        {
            "project": "p",
            "roleId": "deployer",
            "permissions": ["run.services.create", "iam.serviceAccounts.actAs"],
        },
    )
    reader = StackResource(
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        "reader",
        "urn:reader",
        {"project": "p", "roleId": "reader", "permissions": ["aiplatform.tensorboards.get"]},
    )

    def grant(resource_type: str, role: str, **scope: str) -> StackResource:
        return StackResource(resource_type, "g", "urn:grant", {**scope, "role": role, "member": SA})

    project_wide = grant(PROJECT_MEMBER, "projects/p/roles/deployer", project="p")
    assert escalate([deployer, reader, project_wide], PROD) == [
        (
            "g: grants custom role projects/p/roles/deployer (iam.serviceAccounts.actAs) to "
            f"{SA} on the whole project p",
            "urn:grant",
        )
    ]
    on_one_account = grant(SA_MEMBER, "projects/p/roles/deployer", serviceAccountId="trainer")
    harmless = grant(PROJECT_MEMBER, "projects/p/roles/reader", project="p")
    assert escalate([deployer, reader, on_one_account, harmless], PROD) == []


def test_unknown_values_from_a_preview_are_not_violations() -> None:
    network = {"name": "vpc", "autoCreateSubnetworks": UNKNOWN}
    assert check("network-custom-mode", "gcp:compute/network:Network", network) == []
    zone = {**PUBLIC_ZONE, "dnssecConfig": UNKNOWN}
    assert check("dns-dnssec", "gcp:dns/managedZone:ManagedZone", zone) == []
    acl = {"bucket": "b", "roleEntities": UNKNOWN}
    assert check("no-public-acls", "gcp:storage/bucketACL:BucketACL", acl) == []
    subnet = {**GOOD_SUBNET, "ipCidrRange": UNKNOWN}
    assert check("ranges-avoid-vertex-reserved", "gcp:compute/subnetwork:Subnetwork", subnet) == []
    bucket = {**GOOD_BUCKET, "labels": UNKNOWN}
    assert check("labels-present", "gcp:storage/bucket:Bucket", bucket) == []
    # A key the same preview creates: its id is known only after apply.
    assert check("prod-registry-cmek", REPOSITORY, {**GOOD_REPO, "kmsKeyName": UNKNOWN}) == []
    board = {**GOOD_TENSORBOARD, "encryptionSpec": UNKNOWN}
    assert check("prod-tensorboard-cmek", TENSORBOARD, board) == []
    board = {**GOOD_TENSORBOARD, "encryptionSpec": {"kmsKeyName": UNKNOWN}}
    assert check("prod-tensorboard-cmek", TENSORBOARD, board) == []


def test_provider_default_labels_count_as_labels() -> None:
    bare = {k: v for k, v in GOOD_BUCKET.items() if k != "labels"}
    ctx = RuleContext(environment="prod", default_labels={"environment": "prod"})
    assert check("labels-present", "gcp:storage/bucket:Bucket", bare, ctx) == []


def test_label_support_is_read_from_the_installed_provider() -> None:
    assert takes_labels("gcp:storage/bucket:Bucket")
    assert takes_labels("gcp:vertex/aiTensorboard:AiTensorboard")
    assert not takes_labels("gcp:compute/subnetwork:Subnetwork")
    assert not takes_labels("gcp:serviceaccount/account:Account")
    assert not takes_labels("vtx:platform:Storage")


def test_a_notification_channels_settings_are_not_taken_for_its_labels() -> None:
    """An e-mail channel's ``labels`` hold its address: no label is missing from them."""
    channel = "gcp:monitoring/notificationChannel:NotificationChannel"
    settings = {"type": "email", "labels": {"email_address": "a@acme.example"}}
    assert not takes_labels(channel)
    assert check("labels-present", channel, settings, RuleContext(environment="prod")) == []


def test_grants_are_read_from_member_binding_and_policy_resources() -> None:
    policy = json.dumps({"bindings": [{"role": "roles/a", "members": ["user:x", "group:y"]}]})
    grants = grants_of(
        "gcp:kms/cryptoKeyIAMPolicy:CryptoKeyIAMPolicy", {"cryptoKeyId": "k", "policyData": policy}
    )
    assert [(g.principal, g.role, g.scope) for g in grants] == [
        ("user:x", "roles/a", "k"),
        ("group:y", "roles/a", "k"),
    ]
    assert grants_of("gcp:storage/bucket:Bucket", GOOD_BUCKET) == []


def stack_resources(*types: str, platform: dict | None = None) -> list[StackResource]:
    root = StackResource(
        "pulumi:pulumi:Stack", "vtx-prod", "urn:stack", {"platform": platform or {}}
    )
    return [root, *(StackResource(t, f"r{i}", f"urn:{i}", {}) for i, t in enumerate(types))]


NETWORK = "gcp:compute/network:Network"
DNS_POLICY = "gcp:dns/policy:Policy"
VPC = {"name": "vpc", "project": "acme", "autoCreateSubnetworks": False}
VPC_ID = "projects/acme/global/networks/vpc"


def dns_logging(*resources: tuple[str, dict[str, Any]]) -> list[tuple[str, str | None]]:
    found = rule("network-dns-logging").stack_check
    assert found is not None
    stack = [
        StackResource(resource_type, f"r{i}", f"urn:{i}", props)
        for i, (resource_type, props) in enumerate(resources)
    ]
    return found(stack, PROD)


def logging_policy(*urls: str, enabled: object = True) -> tuple[str, dict[str, Any]]:
    networks = [{"networkUrl": url} for url in urls]
    return DNS_POLICY, {"name": "dns", "enableLogging": enabled, "networks": networks}


def test_dns_logging_passes_a_network_its_logging_policy_names() -> None:
    assert dns_logging((NETWORK, VPC), logging_policy(VPC_ID)) == []
    # by selfLink, and by project number where the network gives its project id
    link = f"https://www.googleapis.com/compute/v1/{VPC_ID}"
    assert dns_logging((NETWORK, VPC), logging_policy(link)) == []
    by_number = "projects/123456789012/global/networks/vpc"
    assert dns_logging((NETWORK, VPC), logging_policy(by_number)) == []
    # the network's own outputs (after apply) name it as well as its inputs
    applied = {**VPC, "selfLink": f"https://www.googleapis.com/compute/v1/{VPC_ID}"}
    assert dns_logging((NETWORK, applied), logging_policy(VPC_ID)) == []
    # a network on the provider's default project
    assert dns_logging((NETWORK, {"name": "vpc"}), logging_policy(VPC_ID)) == []


def test_dns_logging_reports_a_network_whose_queries_are_not_logged() -> None:
    assert dns_logging((NETWORK, VPC)) == [
        (
            "network vpc: no DNS policy with enableLogging names it, so its DNS queries are "
            "not logged",
            "urn:0",
        )
    ]
    (message, urn) = dns_logging((NETWORK, VPC), logging_policy(VPC_ID, enabled=False))[0]
    assert message.startswith("network vpc: its DNS policy r1 leaves enableLogging off")
    assert urn == "urn:0"
    unset = (DNS_POLICY, {"name": "dns", "networks": [{"networkUrl": VPC_ID}]})
    assert dns_logging((NETWORK, VPC), unset)[0][0].startswith("network vpc: its DNS policy r1")
    # a policy on another network, or on a network of that name in another project
    other = logging_policy("projects/acme/global/networks/other")
    assert [urn for _, urn in dns_logging((NETWORK, VPC), other)] == ["urn:0"]
    elsewhere = logging_policy("projects/someone-else/global/networks/vpc")
    assert [urn for _, urn in dns_logging((NETWORK, VPC), elsewhere)] == ["urn:0"]
    # each network is judged on its own
    second = {**VPC, "name": "second"}
    found = dns_logging((NETWORK, VPC), (NETWORK, second), logging_policy(VPC_ID))
    assert [urn for _, urn in found] == ["urn:1"]


def test_dns_logging_judges_nothing_a_preview_cannot_see() -> None:
    # Before apply, a policy names a new network by an id that is not known yet.
    assert dns_logging((NETWORK, VPC), logging_policy(UNKNOWN)) == []
    assert dns_logging((NETWORK, VPC), logging_policy(VPC_ID, enabled=UNKNOWN)) == []
    networks_unknown = (DNS_POLICY, {"enableLogging": True, "networks": UNKNOWN})
    assert dns_logging((NETWORK, VPC), networks_unknown) == []
    # but a policy that logs nothing covers no network, known or not
    assert dns_logging((NETWORK, VPC), logging_policy(UNKNOWN, enabled=False))
    # and no network, no finding
    assert dns_logging(logging_policy(VPC_ID)) == []


def test_prod_budget_rule_requires_a_budget_resource() -> None:
    budget = rule("prod-budget").stack_check
    assert budget is not None
    assert budget(stack_resources("gcp:billing/budget:Budget"), PROD) == []
    assert budget(stack_resources("gcp:storage/bucket:Bucket"), PROD) == [
        ("the stack declares no billing budget", None)
    ]


def test_jobs_identity_rule_reads_the_platform_output() -> None:
    jobs = rule("jobs-not-default-compute").stack_check
    assert jobs is not None
    good = {"trainer_service_account": "vtx-trainer@acme.iam.gserviceaccount.com"}
    assert jobs(stack_resources(platform=good), PROD) == []
    bad = jobs(stack_resources(platform={"trainer_service_account": DEFAULT_SA}), PROD)
    assert len(bad) == 1 and DEFAULT_SA in bad[0][0]


def test_prod_only_rules_are_skipped_outside_prod_and_applied_in_prod() -> None:
    subjects = [
        PolicySubject(
            "gcp:storage/bucket:Bucket", "data", "urn:b", {**GOOD_BUCKET, "encryption": None}
        ),
        PolicySubject("pulumi:pulumi:Stack", "vtx-dev", "urn:s", {}, {"platform": {}}),
    ]
    dev = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="dev", required_labels=()))
    }
    assert dev["prod-bucket-cmek"].status == "skipped"
    assert dev["prod-budget"].status == "skipped"
    assert dev["bucket-uniform-access"].status == "pass"
    prod = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="prod", required_labels=()))
    }
    assert prod["prod-bucket-cmek"].status == "fail"
    assert prod["prod-bucket-cmek"].violations[0].resource == "gcp:storage/bucket:Bucket data"
    # "production" is production too (jobs.core.stack.PROD_ENVIRONMENTS), not a lookalike dev stack
    spelled_out = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="production", required_labels=()))
    }
    assert spelled_out["prod-bucket-cmek"].status == "fail"
    assert prod["prod-budget"].status == "fail"
    assert {v.policy for v in mandatory_violations(prod.values())} == {
        "prod-bucket-cmek",
        "prod-budget",
    }


CLOSED = RuleContext(environment="prod", required_labels=(), egress="none")
DENY_ALL_EGRESS = {
    "network": "projects/p/global/networks/vpc",
    "direction": "EGRESS",
    "priority": 65534,
    "destinationRanges": ["0.0.0.0/0"],
    "denies": [{"protocol": "all"}],
}


def closed_network(*firewalls: dict[str, Any], delete_default_routes: bool = True) -> list:
    network = {
        "name": "vpc",
        "project": "p",
        "autoCreateSubnetworks": False,
        "deleteDefaultRoutesOnCreate": delete_default_routes,
    }
    return [
        StackResource("gcp:compute/network:Network", "vpc", "urn:vpc", network),
        *(
            StackResource(FIREWALL, f"fw{i}", f"urn:fw{i}", props)
            for i, props in enumerate(firewalls)
        ),
    ]


def default_route_findings(resources: list[StackResource]) -> list[tuple[str, str | None]]:
    found = rule("egress-none-default-route-denied").stack_check
    assert found is not None
    return found(resources, CLOSED)


def test_closed_network_without_a_default_route_passes() -> None:
    assert default_route_findings(closed_network(GOOGLE_APIS_EGRESS, DENY_ALL_EGRESS)) == []


def test_default_route_to_the_internet_gateway_needs_a_deny_ranked_ahead() -> None:
    route = StackResource(
        "gcp:compute/route:Route",
        "to-internet",
        "urn:route",
        {
            "network": "projects/p/global/networks/vpc",
            "destRange": "0.0.0.0/0",
            "nextHopGateway": "default-internet-gateway",
        },
    )
    # No deny at all: the route and the implied allow-egress rule let everything out.
    (finding,) = default_route_findings([*closed_network(GOOGLE_APIS_EGRESS), route])
    assert "route to-internet sends 0.0.0.0/0 to the default internet gateway" in finding[0]
    assert finding[1] == "urn:route"
    # The deny-all at 65534 shadows it.
    assert default_route_findings([*closed_network(DENY_ALL_EGRESS), route]) == []
    # An allow of 0.0.0.0/0 ranked ahead of the deny lets the traffic out again.
    open_allow = {**GOOGLE_APIS_EGRESS, "destinationRanges": ["0.0.0.0/0"]}
    assert default_route_findings([*closed_network(open_allow, DENY_ALL_EGRESS), route])
    # A deny at 65535 ties the implied allow and loses; one scoped to tagged VMs covers few.
    for weak in ({"priority": 65535}, {"targetTags": ["locked"]}, {"disabled": True}):
        assert default_route_findings([*closed_network({**DENY_ALL_EGRESS, **weak}), route])


def test_network_keeping_its_default_route_is_judged_like_a_route() -> None:
    (finding,) = default_route_findings(closed_network(delete_default_routes=False))
    assert "network vpc keeps the default route 0.0.0.0/0" in finding[0]
    shadowed = closed_network(DENY_ALL_EGRESS, delete_default_routes=False)
    assert default_route_findings(shadowed) == []


def test_default_route_is_not_judged_before_the_firewall_knows_its_network() -> None:
    unknown = {**DENY_ALL_EGRESS, "network": UNKNOWN}
    assert default_route_findings(closed_network(unknown, delete_default_routes=False)) == []


def test_a_closed_peering_needs_vpc_service_controls_for_the_peering() -> None:
    found = rule("egress-none-peering-closed").stack_check
    assert found is not None
    peering = StackResource(
        "gcp:servicenetworking/connection:Connection",
        "vertex-peering",
        "urn:peering",
        {
            "network": "projects/p/global/networks/vpc",
            "service": "servicenetworking.googleapis.com",
        },
    )
    (finding,) = found([peering], CLOSED)
    assert "peering vertex-peering of network vpc: VPC Service Controls" in finding[0]
    controls = "gcp:servicenetworking/vpcServiceControls:VpcServiceControls"
    on = StackResource(controls, "closed", "urn:c", {"network": "vpc", "enabled": True})
    off = StackResource(controls, "open", "urn:o", {"network": "vpc", "enabled": False})
    assert found([peering, on], CLOSED) == []
    assert found([peering, off], CLOSED)
    # Before apply the network may be unknown: nothing is judged then.
    assert (
        found(
            [peering, StackResource(controls, "c", "urn:c", {"network": UNKNOWN, "enabled": True})],
            CLOSED,
        )
        == []
    )


def test_egress_none_rules_apply_only_to_closed_stacks() -> None:
    nat = PolicySubject("gcp:compute/routerNat:RouterNat", "nat", "urn:nat", {"name": "nat"})
    for egress in ("nat", None):
        verdicts = evaluate([nat], RuleContext(environment="dev", egress=egress))
        skipped = {v.rule.name: v.note for v in verdicts if v.status == "skipped"}
        assert skipped["egress-none-no-nat"].startswith("network.egress none only")
    closed = {v.rule.name: v for v in evaluate([nat], CLOSED)}
    assert closed["egress-none-no-nat"].status == "fail"


def test_advisory_rules_do_not_count_as_mandatory_violations() -> None:
    bare = {k: v for k, v in GOOD_BUCKET.items() if k != "labels"}
    subjects = [PolicySubject("gcp:storage/bucket:Bucket", "data", "urn:b", bare)]
    verdicts = evaluate(subjects, RuleContext(environment="dev"))
    assert {v.rule.name for v in verdicts if v.status == "fail"} == {"labels-present"}
    assert mandatory_violations(verdicts) == []


def test_every_rule_has_a_test_case() -> None:
    covered = {c[0] for c in CASES} | {
        "no-service-account-keys",
        "prod-budget",
        "jobs-not-default-compute",
        "no-project-wide-escalating-custom-roles",
        "network-dns-logging",
        "egress-none-default-route-denied",
        "egress-none-peering-closed",
    }
    # The persistent-resource rules' own cases: tests/infra/policy/test_warm_pool_policies.py.
    warm = {r.name for r in RULES if "persistent-resource" in r.name}
    assert covered | warm == {r.name for r in RULES}
