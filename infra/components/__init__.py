"""The stack's parts, one Pulumi ComponentResource per entity, and `vertex_platform.Platform`,
which wires them from a validated stack config. By what they hold: `network/` (VPC, Shared VPC,
perimeter), `access/` (identities, KMS, secrets, CI), `stores/` (buckets, registry), `capacity/`
(quotas, persistent resources); APIs, observability, team budgets and the controller beside them."""
