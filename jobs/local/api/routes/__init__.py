"""The local control plane's REST routes, one module per service, mounted by
`jobs.local.api.server`."""
