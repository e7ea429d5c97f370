"""Drill: a short soak of the local platform loses nothing.

The soak benchmark (bench/soak.py) runs for a few seconds with a few clients against a fresh
local platform: jobs created, got, listed and their logs read; objects of every size uploaded
(in one request and resumable), downloaded and listed; predictions on a healthy model while
another client waits on a model that never answers; a half-sent request held open on the
control plane and on the GCS emulator. Afterwards every job a create answered for is listed and
known, every job that succeeded logged its marker, every object an upload answered for reads
back byte-identical, and no call of the mix failed or got a wrong answer. No timing is asserted:
the figures are the benchmark's (bench/RESULTS.md).
"""

from __future__ import annotations

import pytest

from bench import soak


@pytest.mark.slow  # starts a platform, two models and the jobs' replicas
def test_a_short_soak_loses_nothing() -> None:
    section = soak.run(seconds=4, clients=4, seed=1)
    losses, failures = section.raw["losses"], section.raw["failures"]
    assert losses.check_errors == []
    assert losses.jobs_created > 0 and losses.objects_written > 0
    assert losses.jobs_missing == [] and losses.markers_missing == []
    assert losses.objects_missing == [] and losses.objects_corrupt == []
    assert set(losses.job_states) <= {
        "JOB_STATE_QUEUED",
        "JOB_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_SUCCEEDED",
    }
    mixed = {route: failed for route, failed in failures.items() if route != soak.HUNG}
    assert set(mixed) == set(soak.MIX)  # every route of the mix was called
    assert {route: dict(failed) for route, failed in mixed.items() if failed} == {}
    assert section.raw["seconds"][soak.HUNG]  # the hung model was asked, and gave up on
