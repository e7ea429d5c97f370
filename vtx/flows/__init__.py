"""What several commands run from the terminal: launching a template (shown, confirmed, walked,
followed), following a run's logs, registering a run's model."""
