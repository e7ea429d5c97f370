"""The real Pulumi program run offline, under Pulumi's unit-test mocks: the runner and its
command (`program`, `python -m infra.offline`), what GCP would answer (`mocks`), what a run
recorded (`records`) and the preview drawn from it (`preview`)."""
