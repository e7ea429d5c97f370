"""Warm pool first, then Spot: a capacity ladder walked by `jobs.launch.run.Runner` against the
local platform. Rung 1 names a persistent resource whose one replica another job holds, so its
job waits PENDING; past its max_wait it is cancelled and rung 2 (the same job on Spot, no
resource) runs. Only rung 1's job carries persistentResourceId. Waits are on states."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.core.stack import StackOutputs
from jobs.launch.checks import checked_template
from jobs.launch.plan import LaunchOptions, plan_launch
from jobs.launch.run import Event, MovedOn, Placed, Runner, Submitted, drive
from jobs.spec.document import load_document
from jobs.vertex.client import Vertex
from jobs.vertex.rest import VertexRest
from tests.jobs.local.local_helpers import init_sdk, wait_for

pytestmark = pytest.mark.slow(cost_s=40)
RID = "warm-ladder"
T4 = {
    "machine_type": "n1-standard-4",
    "accelerator_type": "NVIDIA_TESLA_T4",
    "accelerator_count": 1,
}
CHIEF = {"machine": "n1-standard-4", "accelerator": "NVIDIA_TESLA_T4", "accelerator_count": 1}


@pytest.fixture
def busy_pool(local_platform: StackOutputs, tmp_path: Path):
    """A one-replica T4 resource (SDK) whose replica a held job takes until the test ends."""
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    sdk = init_sdk(local_platform, staging_bucket=f"gs://{local_platform.buckets.staging}")
    resource = PersistentResource.create(
        persistent_resource_id=RID,
        resource_pools=[{"id": "t4", "machine_spec": T4, "replica_count": 1}],
    )
    gate = tmp_path / "open"
    hold = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"
    holder = sdk.CustomJob(
        display_name="holder",
        worker_pool_specs=[
            {
                "machine_spec": T4,
                "replica_count": 1,
                "container_spec": {"image_uri": "local/test:1", "command": ["python", "-c", hold]},
            }
        ],
    )
    holder.submit(persistent_resource_id=RID)
    wait_for(lambda: holder._sync_gca_resource() or holder.state.name == "JOB_STATE_RUNNING")
    yield
    gate.touch()
    wait_for(lambda: holder._sync_gca_resource() or holder.state.name == "JOB_STATE_SUCCEEDED")
    resource.delete()


def test_a_busy_warm_pool_gives_way_to_the_spot_rung(
    busy_pool, local_platform: StackOutputs, tmp_path: Path
) -> None:
    template = tmp_path / "warm-first.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "warm-first",
                "image": "trainer",
                "command": ["python", "-c", "print('ran')"],
                "persistent_resource": RID,
                "pools": {"chief": CHIEF},
                "scheduling": {"strategy": "standard", "timeout": "10m"},
                "capacity": {
                    "max_wait": "2s",
                    "ladder": [{"set": {"scheduling.strategy": "spot"}}],
                },
            }
        )
    )
    checked, problems = checked_template(load_document(template, []))
    assert checked is not None, problems
    plan = plan_launch(checked, local_platform, str(template), LaunchOptions(poll_s=0.2))
    assert not plan.problems and plan.refusal is None, plan.problems or plan.refusal
    assert [r.label for r in plan.rungs] == [
        "rung 1 us-central1 1xT4 STANDARD on warm-ladder",
        "rung 2 us-central1 1xT4 SPOT",
    ]
    events: list[Event] = []

    def show(event: Event) -> None:
        events.append(event)

    code = drive(Runner(plan, Vertex(local_platform), poll_s=0.2).events(), show)
    assert code == 0, events
    warm_job, spot_job = [e.name for e in events if isinstance(e, Submitted)]
    (moved,) = [e for e in events if isinstance(e, MovedOn)]
    assert moved.rung.number == 1 and moved.cancelled and "max_wait" in (moved.reason or "")
    assert [e.rung.number for e in events if isinstance(e, Placed)] == [2]
    rest = VertexRest(local_platform)
    assert rest.get(warm_job).rest["jobSpec"]["persistentResourceId"] == RID
    assert "persistentResourceId" not in rest.get(spot_job).rest["jobSpec"]
    wait_for(lambda: rest.get(warm_job).terminal and rest.get(spot_job).terminal)
