"""Checkpoints: committed-or-ignored steps on GCS or local disk (`store`), everything a resume
restores as one DCP state (`state`), and the record of what a checkpoint was trained with
(`fingerprint`)."""
