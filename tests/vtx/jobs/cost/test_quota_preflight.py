"""The live quota preflight as `vtx launch`, `vtx cost --stack` and `vtx quota` show it."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from rich.console import Console
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.launch.checks import checked_template
from jobs.launch.plan import plan_launch
from jobs.spec.document import load_document
from tests.jobs.quota.quota_fakes import (
    DATA,
    L4,
    L4_SPOT,
    QUOTA_INFOS,
    FakeGoogle,
    reader,
    rest_job,
)
from vtx.cli import app
from vtx.views.launch import print_launch_plan

runner = CliRunner(env={"COLUMNS": "200"})


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def l4_template(tmp_path: Path, workers: int, strategy: str = "standard") -> Path:
    """A chief and ``workers`` workers on g2-standard-8 (one L4 built in each)."""
    path = tmp_path / "l4.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "l4-quota",
                "image": "trainer",
                "command": ["python", "-c", "pass"],
                "pools": {
                    "chief": {"machine": "g2-standard-8"},
                    "workers": {"machine": "g2-standard-8", "replicas": workers},
                },
                "scheduling": {"strategy": strategy, "timeout": "1h"},
            }
        )
    )
    return path


def stack_file(tmp_path: Path, endpoint: str) -> Path:
    """The dev stack's outputs, its APIs served at ``endpoint`` (as the local platform's are)."""
    document = json.loads((DATA / "stack-dev.json").read_text())
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({**document, "vertex_endpoint": endpoint}))
    return path


def test_launch_refuses_a_job_over_the_limit_unless_told_to_ignore_it(
    google: FakeGoogle, tmp_path: Path
) -> None:
    template, stack = l4_template(tmp_path, workers=11), stack_file(tmp_path, google.url)
    code, out = vtx("launch", str(template), "--stack-file", str(stack), "--dry-run")
    assert code == 1, out
    assert "custom_model_training_nvidia_l4_gpus needs 12, over the limit of 8" in out
    assert "vtx-nvidia-l4-ondemand-us-central1" in out
    assert "not submitted: over the quota limit in us-central1" in out
    assert "dry run" not in out
    code, out = vtx("launch", str(template), "--stack-file", str(stack), "--dry-run",
                    "--ignore-quota")  # fmt: skip
    assert code == 0, out
    assert "over the limit of 8" in out and "dry run: nothing submitted" in out


def test_launch_warns_when_the_job_fits_the_limit_but_not_what_is_free(
    google: FakeGoogle, tmp_path: Path
) -> None:
    google.jobs["us-central1"] = [rest_job("JOB_STATE_RUNNING", replicas=3)]  # 4 L4s held
    template, stack = l4_template(tmp_path, workers=5), stack_file(tmp_path, google.url)
    code, out = vtx("launch", str(template), "--stack-file", str(stack), "--dry-run")
    assert code == 0, out
    assert "needs 6, within the limit of 8 but only 4 free now (4 held by running jobs)" in out
    assert "short now" in out and "dry run: nothing submitted" in out


def test_launch_goes_on_when_the_quota_cannot_be_read(tmp_path: Path) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}"
    template, stack = l4_template(tmp_path, workers=11), stack_file(tmp_path, url)
    code, out = vtx("launch", str(template), "--stack-file", str(stack), "--dry-run")
    assert code == 0, out
    assert f"quota: not checked (cannot reach {url}: " in out
    assert "dry run: nothing submitted" in out


def test_a_gcp_stack_is_told_the_stanza_for_its_pulumi_config(
    google: FakeGoogle, quota_stack: StackOutputs, tmp_path: Path
) -> None:
    template = checked_template(load_document(l4_template(tmp_path, 3, "spot")), None)[0]
    assert template is not None
    google.infos = [i for i in QUOTA_INFOS if "preemptible" not in i["metric"]]
    out = Console(record=True, width=200, soft_wrap=True)
    plan = plan_launch(template, quota_stack, "l4.yaml", reader=reader(quota_stack, google))
    print_launch_plan(out, plan)  # what `vtx launch --dry-run` shows
    text = out.export_text()
    assert not plan.problems and plan.refusal is None, text
    assert "Cloud Quotas lists no quota for" in text and "preemptible_nvidia_l4_gpus" in text
    google.infos = QUOTA_INFOS
    google.jobs["us-central1"] = [rest_job("JOB_STATE_RUNNING", 13, strategy="SPOT")]
    plan = plan_launch(template, quota_stack, "l4.yaml", reader=reader(quota_stack, google))
    print_launch_plan(out, plan)  # what `vtx launch --dry-run` shows
    text = out.export_text()
    assert not plan.problems and plan.refusal is None, text
    assert (
        "request quota preference vtx-nvidia-l4-spot-us-central1: add {accelerator: NVIDIA_L4, "
        "count: 18, spot: true, region: us-central1} to Pulumi.dev.yaml under "
        "vtx:platform.quotas, then `pulumi up`"
    ) in text


def test_cost_with_a_stack_shows_the_live_quota(google: FakeGoogle, tmp_path: Path) -> None:
    template, stack = l4_template(tmp_path, workers=1), stack_file(tmp_path, google.url)
    code, out = vtx("cost", str(template), "--stack-file", str(stack))
    assert code == 0, out
    assert "Quota in us-central1 (limits: Cloud Quotas, now)" in out
    row = next(line for line in out.splitlines() if "nvidia_l4_gpus" in line)
    assert [cell.strip() for cell in row.split("│")[2:7]] == ["2", "8", "0", "8", "ok"]
    code, out = vtx("cost", str(template))
    assert "Quota needed in us-central1" in out and "Cloud Quotas" not in out


def test_vtx_quota_lists_limits_usage_and_free_per_region(
    google: FakeGoogle, tmp_path: Path
) -> None:
    google.jobs["us-east4"] = [rest_job("JOB_STATE_RUNNING", replicas=1)]
    stack = stack_file(tmp_path, google.url)
    regions = ["--region", "us-central1", "--region", "us-east4"]
    code, out = vtx("quota", "--stack-file", str(stack), *regions, "--accelerator", "nvidia_l4",
                    "--format", "json")  # fmt: skip
    assert code == 0, out
    rows = {(r["region"], r["metric"]): r for r in json.loads(out)}
    assert list(rows) == [
        ("us-central1", L4), ("us-central1", L4_SPOT), ("us-east4", L4), ("us-east4", L4_SPOT)
    ]  # fmt: skip
    assert rows["us-east4", L4] | {} == {
        "region": "us-east4", "metric": L4,
        "quota_id": "CustomModelTrainingNvidiaL4GpusPerProjectPerRegion", "listed": True,
        "limit": 4, "unlimited": False, "in_use": 2, "free": 2,
    }  # fmt: skip
    assert rows["us-east4", L4_SPOT]["limit"] == 0
    code, out = vtx("quota", "--stack-file", str(stack))
    assert code == 0, out
    assert "custom_model_training_cpus" in out and "online_prediction" not in out


def test_vtx_quota_fails_naming_why_when_the_quota_cannot_be_read(
    google: FakeGoogle, tmp_path: Path
) -> None:
    google.status = 403
    code, out = vtx("quota", "--stack-file", str(stack_file(tmp_path, google.url)))
    assert code == 1
    assert "cannot read the quota of vtx-dev-123: HTTP 403 caller lacks permission" in out
