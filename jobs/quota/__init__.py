"""Quota: what a job needs (`needed`), and the project's live Vertex quota read from the Cloud
Quotas API before a submit (`cloud_quotas`)."""
