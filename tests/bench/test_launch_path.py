"""bench.launch_path's profile hook: vtx's modules on the stack at the API call, and those run."""

from __future__ import annotations

import sys

from bench.launch_path import API_CALL, Recorder


def test_the_path_is_vtxs_modules_on_the_stack_when_the_sdk_create_is_entered() -> None:
    sdk: dict = {"__name__": API_CALL[0]}
    exec(f"def {API_CALL[1]}():\n    return 'created'", sdk)
    flow: dict = {"__name__": "vtx.flows.fake"}
    exec("def launch(create):\n    return submit(create)", flow)
    client: dict = {"__name__": "jobs.vertex.fake"}
    exec("def submit(create):\n    return create()", client)
    flow["submit"] = client["submit"]
    side: dict = {"__name__": "jobs.pricing.fake"}
    exec("def price():\n    return 1", side)

    recorder = Recorder()
    sys.setprofile(recorder)
    try:
        side["price"]()
        assert flow["launch"](sdk[API_CALL[1]]) == "created"
    finally:
        sys.setprofile(None)

    assert recorder.path == ["vtx.flows.fake", "jobs.vertex.fake"]
    assert list(recorder.entered) == ["jobs.pricing.fake", "vtx.flows.fake", "jobs.vertex.fake"]
