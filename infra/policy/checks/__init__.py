"""The policy pack's checks, one module per domain: plain functions over a resource's type token
and properties (no Pulumi import), reading through ``infra.policy``'s readers."""
