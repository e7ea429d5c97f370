"""The stack's parts, one Pulumi ComponentResource per entity (APIs, identities, KMS, network,
Shared VPC, buckets, registry, secrets, observability, quotas, CI), and `vertex_platform.Platform`,
which wires them from a validated stack config."""
