"""bench/warm_start.py runs end to end at its smallest size: its own local platform, a warm pool
created through the SDK, the warm variant's job on the pool (the bench refuses to report
otherwise), and a section with both variants, their ratio and each one's goodput timeline (where
its time went, from its trainer lines). It reports, never judges: no figure is asserted, only
that the timeline read the job's steps and tiles its wall time."""

from __future__ import annotations

import pytest

from bench.warm_start import Config, run

pytestmark = pytest.mark.slow(cost_s=30)


def test_the_bench_runs_both_variants_and_says_what_it_cannot_show() -> None:
    section = run(Config(reps=1))
    assert set(section.raw) == {"warm", "cold"}
    assert all(len(timings) == 1 for timings in section.raw.values())
    assert "cold / warm (medians)" in section.body
    assert "The local platform provisions no VMs" in section.body
    assert "| variant | waiting for capacity s | provisioning, container start s |" in section.body
    for (timing,) in section.raw.values():
        phases = timing["phases_s"]
        assert phases["productive"] > 0, phases  # the five steps' lines were read
        assert sum(phases.values()) == pytest.approx(timing["wall_s"])
