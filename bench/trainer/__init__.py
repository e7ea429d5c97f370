"""Benchmarks of the trainer: against Hugging Face `Trainer`, as sizes grow, its attention, its
loss, its checkpoints, and on a GPU."""
