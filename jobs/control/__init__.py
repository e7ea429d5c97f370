"""The controller: what vtx does over time (a capacity ladder's walk, a run's and a study's
budget), decided by one pure reconciler over a run record and applied by one driver."""
