"""Launching, below the CLI: a template file checked whole (job, capacity ladder, study), turned
into a launch plan of rungs, and walked by one runner that reports typed events."""
