"""Where the jobs' data and images live: the buckets (`storage.py`) and the Artifact Registry
(`registry.py`)."""
