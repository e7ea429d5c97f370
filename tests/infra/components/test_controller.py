"""The stack's controller under mocks: Cloud Scheduler calls one function every minute as an
account that may invoke it alone; the function runs the repository's controller as an account
holding exactly what a pass uses; the stack exports ``controller: true`` and the function reads
the same outputs."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest
import yaml

from infra.components.controller import ENTRY_POINT, STACK_ENV, source_digest, source_files
from infra.config import CONTROLLER_PERMISSIONS
from infra.offline.program import OfflineRun, RecordedResource
from infra.policy.iam import grants_of
from jobs.control import cloud_function
from jobs.control.records import Records
from jobs.core.stack import StackOutputs
from jobs.vertex.rest import VertexRest
from tests.jobs.control.test_driver import SLEEPER

FUNCTION = "gcp:cloudfunctionsv2/function:Function"
SCHEDULE = "gcp:cloudscheduler/job:Job"


def controller(run: OfflineRun, type_token: str) -> RecordedResource:
    (found,) = [r for r in run.of_type(type_token) if r.component == "controller"]
    return found


def grants_to(run: OfflineRun, email: str) -> set[tuple[str, str, str]]:
    return {
        (g.role, g.scope_kind, g.scope)
        for r in run.resources
        for g in grants_of(r.type, r.inputs)
        if g.principal == f"serviceAccount:{email}"
    }


def account(run: OfflineRun, suffix: str) -> str:
    stack = StackOutputs.model_validate(run.outputs["platform"])
    return f"acme-vtx-{stack.environment}-{suffix}@{stack.project}.iam.gserviceaccount.com"


def test_every_stack_exports_its_controller_and_the_function_reads_those_outputs(
    stack_run: OfflineRun,
) -> None:
    stack = StackOutputs.model_validate(stack_run.outputs["platform"])
    assert stack.controller is True
    function = controller(stack_run, FUNCTION)
    assert function.inputs["buildConfig"]["entryPoint"] == ENTRY_POINT == "controller_pass"
    assert STACK_ENV == cloud_function.STACK_ENV
    given = json.loads(function.inputs["serviceConfig"]["environmentVariables"][STACK_ENV])
    assert StackOutputs.model_validate(given) == stack
    service = function.inputs["serviceConfig"]
    assert service["ingressSettings"] == "ALLOW_INTERNAL_ONLY"
    assert service["serviceAccountEmail"] == account(stack_run, "ctl")


def test_scheduler_calls_the_function_every_minute_as_an_account_that_may_invoke_it_alone(
    stack_run: OfflineRun,
) -> None:
    job = controller(stack_run, SCHEDULE)
    function = controller(stack_run, FUNCTION)
    assert job.inputs["schedule"] == "* * * * *"
    assert job.inputs["retryConfig"] == {"retryCount": 0}  # the next minute's pass is the retry
    target = job.inputs["httpTarget"]
    invoker = account(stack_run, "ctlsched")
    assert target["oidcToken"]["serviceAccountEmail"] == invoker
    assert target["uri"] == target["oidcToken"]["audience"] == function.outputs["url"]
    assert grants_to(stack_run, invoker) == {
        ("roles/run.invoker", "name", function.outputs["name"])
    }


def test_the_controller_holds_exactly_what_a_pass_uses(stack_run: OfflineRun) -> None:
    stack = StackOutputs.model_validate(stack_run.outputs["platform"])
    (role,) = [
        r
        for r in stack_run.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
        if r.component == "controller"
    ]
    assert sorted(role.inputs["permissions"]) == sorted(CONTROLLER_PERMISSIONS)
    trainer = f"projects/{stack.project}/serviceAccounts/{stack.trainer_service_account}"
    assert grants_to(stack_run, account(stack_run, "ctl")) == {
        (role.outputs["name"], "project", stack.project),
        ("roles/iam.serviceAccountUser", "serviceAccountId", trainer),
        ("roles/storage.objectUser", "bucket", stack.buckets.checkpoints),
    }
    (records,) = [
        r
        for r in stack_run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r.component == "controller" and r.inputs["role"] == "roles/storage.objectUser"
    ]
    condition = records.inputs["condition"]["expression"]
    assert f'"projects/_/buckets/{stack.buckets.checkpoints}/objects/runs/"' in condition
    assert "objectListPrefix" in condition and '.startsWith("runs/")' in condition


def test_the_function_source_is_the_repositorys_controller_and_runs_alone(
    tmp_path: Path,
) -> None:
    """The archive holds what the entry point imports: unpacked first on the path, `main`
    imports with every module of ours from the archive, none from the checkout."""
    files = source_files()
    assert "jobs/control/driver.py" in files and "jobs/core/catalog/limits.yaml" in files
    assert not any(name.startswith(("jobs/local/", "jobs/templates/")) for name in files)
    assert source_digest(files) == source_digest(dict(reversed(files.items())))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    zipfile.ZipFile(buffer).extractall(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import main, jobs;"
        "ours = [m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'jobs'];"
        "assert all(f.startswith(sys.argv[1]) for f in ours if f), ours;"
        "print(main.controller_pass.__module__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "jobs.control.cloud_function"


@pytest.fixture
def own_stack(local_platform: StackOutputs) -> StackOutputs:
    """The local stack with a checkpoints bucket of this test's own: the platform's own
    controller, which watches the stack's bucket, never reaches this test's record."""
    from jobs.vertex.google_session import storage_client

    bucket = f"vtx-fn-{uuid.uuid4().hex[:12]}"
    storage_client(local_platform).create_bucket(bucket)
    buckets = local_platform.buckets.model_copy(update={"checkpoints": bucket})
    return local_platform.model_copy(update={"buckets": buckets, "controller": True})


def test_the_deployed_entry_point_makes_a_pass_through_the_functions_framework(
    own_stack: StackOutputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main.py as the archive holds it, run by the Functions Framework as Cloud Scheduler
    calls it (an HTTP POST): the pass submits a live run's first rung, with its marker."""
    import functions_framework

    from jobs.control.record import record_of
    from jobs.launch.plan import LaunchOptions, plan_launch
    from jobs.spec.gcloud import load_template

    run_id = f"fn-{uuid.uuid4().hex[:8]}"
    template = tmp_path / "sleeper.yaml"
    template.write_text(yaml.safe_dump(SLEEPER))
    plan = plan_launch(load_template(template), own_stack, str(template), LaunchOptions(run_id))
    Records(own_stack).create(record_of(plan))
    (tmp_path / "main.py").write_bytes(source_files()["main.py"])
    monkeypatch.setenv(STACK_ENV, own_stack.model_dump_json())
    app = functions_framework.create_app(
        target=ENTRY_POINT, source=str(tmp_path / "main.py"), signature_type="http"
    )
    rest = VertexRest(own_stack)
    try:
        answer = app.test_client().post("/")
        assert answer.status_code == 200, answer.get_data(as_text=True)
        report = answer.get_json()
        assert report["runs"] == 1 and report["errors"] == []
        assert report["actions"][run_id]  # what the pass did to this run, said
        [job] = rest.list(run_id)
        stored = Records(own_stack).read(run_id)
        assert stored is not None and [a.job for a in stored.record.attempts] == [job.name]
    finally:
        for job in rest.list(run_id):
            if not job.terminal:
                rest.cancel(job.name)
