"""The API's rules over a job's facts (`JobFacts`): where it runs (machines.py), when and on what
capacity (scheduling.py), its replicas' environment and secrets (environment.py), its names
(metadata.py); registry.py runs them in order."""
