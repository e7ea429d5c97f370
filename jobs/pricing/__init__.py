"""Pricing: what a job, a deployed model or a warm pool costs, and where the figures come from.

- `estimates`: a job's $/h per pool and in total, on-demand, Spot and FLEX_START, boot disks as
  their own line, the cost at the timeout cap, a run's budget warning.
- `plan`: a compiled job with its estimate, computed once (what `vtx launch` shows and submits).
- `serving_cost`: a deployed model's $/h per replica, at its floor and its ceiling.
- `warm_pools`: a persistent resource's $/h, busy or idle.
- `billing_skus`: Cloud Billing Catalog SKUs matched, strictly, to the catalog's figures.
- `refresh`: `vtx prices refresh`, the SKUs read (from the API or a saved file) and written as
  dated tables beside the shipped ones (`jobs/core/catalog/prices/`, which `infra` reads too).
"""
