"""Goodput as vtx shows it: a run's and a study's, in the terminal and as a `vtx report` page."""
