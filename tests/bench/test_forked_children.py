"""bench.forked_children: children forked from a zygote are processes of their own, started as
`python -m` starts them, and fail, time out and report as run_json_child's plain children do."""

from __future__ import annotations

import os

import pytest

from bench.common import REPO, children_forked_after, run_json_child
from bench.forked_children import current

PROBE = "tests.bench.child_probe"


def test_forked_children_are_fresh_processes_seen_as_plain_children_are() -> None:
    plain = run_json_child(PROBE, ["look", "x"])
    with children_forked_after(["json"]):
        zygote = current()
        assert zygote is not None
        first, second = run_json_child(PROBE, ["look", "x"]), run_json_child(PROBE, ["look"])
    assert current() is None
    assert zygote.proc.poll() is not None  # the block's end stopped the zygote
    pids = {first["pid"], second["pid"], zygote.proc.pid, os.getpid()}
    assert len(pids) == 4
    # What one child did to its modules, the next never sees: each starts from the zygote.
    assert not first["marked_before"] and not second["marked_before"]
    assert first["argv"] == ["look", "x"] and second["argv"] == ["look"]
    for found in (first, second, plain):
        assert (found["cwd"], found["hashseed"]) == (str(REPO), "0")
    assert {k: v for k, v in plain.items() if k != "pid"} == {
        k: v for k, v in first.items() if k != "pid"
    }


def test_a_forked_child_that_fails_or_hangs_raises_with_its_stderr() -> None:
    with children_forked_after(["json"]):
        with pytest.raises(RuntimeError, match="the probe was told to fail"):
            run_json_child(PROBE, ["fail"])
        with pytest.raises(RuntimeError, match=r"failed \(-14\)"):  # SIGALRM at its timeout
            run_json_child(PROBE, ["hang"], timeout_s=1)
        assert run_json_child(PROBE, ["look"])["argv"] == ["look"]  # the zygote carries on


def test_a_block_inside_another_uses_the_outer_zygote() -> None:
    with children_forked_after(["json"]):
        outer = current()
        with children_forked_after(["json"]):
            assert current() is outer
        assert current() is outer and outer is not None and outer.proc.poll() is None
