"""What capacity the jobs get: quota preferences (`quotas.py`) and warm pools, persistent
resources (`persistent_resources.py`)."""
