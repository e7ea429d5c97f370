"""The live quota preflight (jobs/training/quotas.py) against a real HTTP server on 127.0.0.1 that
serves
Cloud Quotas' quotaInfos.list and Vertex's customJobs.list in Google's JSON shape (the fields of
the v1 references; the figures and the CPU quota id are made up for the tests)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import yaml
from rich.console import Console
from typer.testing import CliRunner

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs, load_stack_file
from jobs.launch.checks import checked_template
from jobs.launch.plan import plan_launch
from jobs.spec.document import load_document
from jobs.training.quotas import (
    NOT_LISTED,
    OK,
    OVER_LIMIT,
    SHORT_NOW,
    QuotaLimit,
    QuotaReader,
    compare,
    in_use,
    preflight,
    read_regions,
    region_limits,
)
from vtx.cli import app
from vtx.views.launch import print_launch_plan

DATA = Path(__file__).resolve().parent / "data"
QUOTA_INFOS = json.loads((DATA / "cloudquotas-aiplatform.json").read_text())["quotaInfos"]
PREFIX = "aiplatform.googleapis.com/custom_model_training_"
L4 = f"{PREFIX}nvidia_l4_gpus"
L4_SPOT = f"{PREFIX}preemptible_nvidia_l4_gpus"
H100 = f"{PREFIX}nvidia_h100_gpus"
CPUS = f"{PREFIX}cpus"
PAGE = 2


def rest_job(state: str, replicas: int, strategy: str | None = None) -> dict:
    """A CustomJob as Vertex lists it: chief g2-standard-8 (1 x L4) plus ``replicas`` workers."""
    machine = {
        "machineType": "g2-standard-8",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
    }
    spec: dict = {
        "workerPoolSpecs": [
            {"machineSpec": machine, "replicaCount": "1"},
            {"machineSpec": machine, "replicaCount": str(replicas)},
        ]
    }
    if strategy:
        spec["scheduling"] = {"strategy": strategy}
    return {"name": f"projects/1/locations/us-central1/customJobs/{state}", "state": state,
            "displayName": "other", "jobSpec": spec}  # fmt: skip


@dataclass
class FakeGoogle:
    """What the server serves and what it was asked."""

    url: str = ""
    infos: list[dict] = field(default_factory=lambda: QUOTA_INFOS)
    jobs: dict[str, list[dict]] = field(default_factory=dict)
    """Region -> CustomJobs listed there."""
    status: int = 200
    raw: bytes | None = None
    """An answer that is not JSON (a proxy's page)."""
    requests: list[tuple[str, dict, str]] = field(default_factory=list)
    """(path, query, Authorization header) of each request."""


def _handler(fake: FakeGoogle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            fake.requests.append((url.path, query, self.headers.get("Authorization", "")))
            if fake.status != 200:
                return self._send(fake.status, {"error": {"message": "caller lacks permission"}})
            parts = url.path.split("/")
            if url.path.endswith("/services/aiplatform.googleapis.com/quotaInfos"):
                start = int(query.get("pageToken", 0))
                body: dict = {"quotaInfos": fake.infos[start : start + PAGE]}
                if start + PAGE < len(fake.infos):
                    body["nextPageToken"] = str(start + PAGE)
                return self._send(200, body)
            if url.path.endswith("/customJobs"):
                return self._send(200, {"customJobs": fake.jobs.get(parts[5], [])})
            return self._send(404, {"error": {"message": f"no route {url.path}"}})

        def _send(self, status: int, body: dict) -> None:
            data = fake.raw if fake.raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    fake = FakeGoogle()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def dev_stack() -> StackOutputs:
    return load_stack_file(DATA / "stack-dev.json")


def reader(stack: StackOutputs, fake: FakeGoogle) -> QuotaReader:
    return QuotaReader(stack, session=requests.Session(), endpoint=fake.url)


# ---- reading ------------------------------------------------------------------------------------


def test_reader_follows_every_page_of_the_projects_quota_infos(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    infos = reader(dev_stack, google).quota_infos()
    assert [i["quotaId"] for i in infos] == [i["quotaId"] for i in QUOTA_INFOS]
    paths = {path for path, _, _ in google.requests}
    assert paths == {
        "/v1/projects/vtx-dev-123/locations/global/services/aiplatform.googleapis.com/quotaInfos"
    }
    assert len(google.requests) == -(-len(QUOTA_INFOS) // PAGE)


def test_a_local_stack_reads_its_endpoint_with_the_platforms_token(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    local = dev_stack.model_copy(update={"vertex_endpoint": google.url, "local_token": "t0k"})
    QuotaReader(local).quota_infos()
    assert {auth for _, _, auth in google.requests} == {"Bearer t0k"}


def test_the_region_entry_wins_over_the_default_and_other_services_metrics_are_left_out() -> None:
    central = region_limits(QUOTA_INFOS, "us-central1")
    east = region_limits(QUOTA_INFOS, "us-east4")
    assert central[L4].limit == 8 and east[L4].limit == 4
    assert central[L4].quota_id == "CustomModelTrainingNvidiaL4GpusPerProjectPerRegion"
    assert central[H100].limit == 0  # QuotaDetails.value 0 is left out of the JSON (proto3)
    assert central[CPUS].limit == 575 and east[CPUS].limit is None  # -1: unlimited
    assert all(metric.startswith(PREFIX) for metric in central)
    assert region_limits(QUOTA_INFOS, "mars-north1") == {}


def test_in_use_counts_jobs_not_ended_accelerators_times_replicas() -> None:
    jobs = [
        rest_job("JOB_STATE_RUNNING", replicas=2),
        rest_job("JOB_STATE_PENDING", replicas=1, strategy="SPOT"),
        rest_job("JOB_STATE_QUEUED", replicas=1),
        rest_job("JOB_STATE_SUCCEEDED", replicas=7),
        rest_job("JOB_STATE_CANCELLED", replicas=7),
    ]
    held = in_use(jobs, load_catalog())
    assert held[L4] == 3 + 2 and held[L4_SPOT] == 2
    assert held[CPUS] == 8 * 7  # g2-standard-8: 8 vCPUs, seven VMs


def test_the_jobs_read_are_the_regions_and_ended_ones_are_filtered_here_too(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    google.jobs["us-central1"] = [
        rest_job("JOB_STATE_RUNNING", 1),
        rest_job("JOB_STATE_CANCELLED", 1),
    ]
    jobs = reader(dev_stack, google).jobs("us-central1")
    assert [j["state"] for j in jobs] == ["JOB_STATE_RUNNING"]
    path, query, _ = google.requests[-1]
    assert path == "/v1/projects/vtx-dev-123/locations/us-central1/customJobs"
    assert 'state!="JOB_STATE_CANCELLED"' in query["filter"]


def test_the_filter_leaves_out_every_final_state_and_only_those(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    """A job holds quota until it has ended, in any of v1's five final states."""
    google.jobs["us-central1"] = [
        rest_job("JOB_STATE_EXPIRED", 1),
        rest_job("JOB_STATE_PARTIALLY_SUCCEEDED", 1),
        rest_job("JOB_STATE_PAUSED", 1),
    ]
    jobs = reader(dev_stack, google).jobs("us-central1")
    assert [j["state"] for j in jobs] == ["JOB_STATE_PAUSED"]
    _, query, _ = google.requests[-1]
    assert query["filter"] == (
        'state!="JOB_STATE_CANCELLED" AND state!="JOB_STATE_EXPIRED" AND '
        'state!="JOB_STATE_FAILED" AND state!="JOB_STATE_PARTIALLY_SUCCEEDED" AND '
        'state!="JOB_STATE_SUCCEEDED"'
    )


# ---- comparing ----------------------------------------------------------------------------------


def _limits(**values: int | None) -> dict[str, QuotaLimit]:
    metrics = {"l4": L4, "l4_spot": L4_SPOT, "cpus": CPUS}
    return {
        metrics[k]: QuotaLimit(metrics[k], f"Id{k}", "us-central1", v) for k, v in values.items()
    }


def test_a_job_over_the_limit_names_the_preference_infra_would_create() -> None:
    check = compare({L4: 12, CPUS: 96}, _limits(l4=8, cpus=575), {L4: 2}, "us-central1",
                    load_catalog())  # fmt: skip
    (over,) = check.over_limit
    assert over.metric == L4 and over.verdict == OVER_LIMIT
    assert over.preference is not None
    assert over.preference.preference_id == "vtx-nvidia-l4-ondemand-us-central1"
    # Enough for this job beside what runs; the API's id differs from the catalog's: named.
    assert over.preference.stanza == (
        "{accelerator: NVIDIA_L4, count: 14, spot: false, region: us-central1, quota_id: Idl4}"
    )
    assert [m.verdict for m in check.metrics] == [OK, OVER_LIMIT]  # sorted: cpus, then l4


def test_a_job_within_the_limit_but_not_what_is_free_is_short_now() -> None:
    check = compare({L4_SPOT: 6}, _limits(l4_spot=8), {L4_SPOT: 4}, "us-central1", load_catalog())
    (short,) = check.short_now
    assert short.verdict == SHORT_NOW
    assert (short.needed, short.limit, short.in_use, short.free) == (6, 8, 4, 4)
    assert short.preference is not None and short.preference.spot
    assert not check.over_limit


def test_unlisted_and_unlimited_metrics_never_block() -> None:
    check = compare({L4: 4, CPUS: 10_000}, _limits(cpus=None), {CPUS: 50}, "us-central1",
                    load_catalog())  # fmt: skip
    verdicts = {m.metric: m.verdict for m in check.metrics}
    assert verdicts == {L4: NOT_LISTED, CPUS: OK}
    assert not check.over_limit and not check.short_now


def test_the_catalogs_own_quota_id_is_not_repeated_in_the_stanza(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    check = preflight({H100: 8}, "us-central1", reader(dev_stack, google), load_catalog())
    (over,) = check.over_limit
    assert over.limit == 0 and over.preference is not None
    assert over.preference.stanza == (
        "{accelerator: NVIDIA_H100_80GB, count: 8, spot: false, region: us-central1}"
    )


def test_read_regions_reads_the_quota_once_and_each_regions_jobs(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    google.jobs["us-east4"] = [rest_job("JOB_STATE_RUNNING", 3)]
    central, east = read_regions(
        reader(dev_stack, google), ["us-central1", "us-east4"], load_catalog()
    )
    assert central.in_use == {} and east.in_use[L4] == 4
    assert (central.limits[L4].limit, east.limits[L4].limit) == (8, 4)
    quota_reads = [p for p, _, _ in google.requests if p.endswith("/quotaInfos")]
    assert len(quota_reads) == -(-len(QUOTA_INFOS) // PAGE)


# ---- not checked --------------------------------------------------------------------------------


def test_an_api_error_skips_the_check_with_its_reason(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    google.status = 403
    check = preflight({L4: 1}, "us-central1", reader(dev_stack, google), load_catalog())
    assert check.skipped is not None and "HTTP 403 caller lacks permission" in check.skipped
    assert check.metrics == [] and not check.over_limit


def test_an_unreachable_quota_api_skips_the_check_with_its_reason(dev_stack: StackOutputs) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}"
    unreachable = QuotaReader(dev_stack, session=requests.Session(), endpoint=url)
    check = preflight({L4: 1}, "us-central1", unreachable, load_catalog())
    assert check.skipped is not None and check.skipped.startswith(f"cannot reach {url}")


def test_an_answer_that_is_not_a_json_object_skips_the_check(
    google: FakeGoogle, dev_stack: StackOutputs
) -> None:
    google.raw = b"<html>captive portal</html>"
    check = preflight({L4: 1}, "us-central1", reader(dev_stack, google), load_catalog())
    assert check.skipped is not None and "did not answer with a JSON object" in check.skipped


# ---- through the CLI ----------------------------------------------------------------------------

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
    google: FakeGoogle, dev_stack: StackOutputs, tmp_path: Path
) -> None:
    template = checked_template(load_document(l4_template(tmp_path, 3, "spot")), None)[0]
    assert template is not None
    google.infos = [i for i in QUOTA_INFOS if "preemptible" not in i["metric"]]
    out = Console(record=True, width=200, soft_wrap=True)
    plan = plan_launch(template, dev_stack, "l4.yaml", reader=reader(dev_stack, google))
    print_launch_plan(out, plan)  # what `vtx launch --dry-run` shows
    text = out.export_text()
    assert not plan.problems and plan.refusal is None, text
    assert "Cloud Quotas lists no quota for" in text and "preemptible_nvidia_l4_gpus" in text
    google.infos = QUOTA_INFOS
    google.jobs["us-central1"] = [rest_job("JOB_STATE_RUNNING", 13, strategy="SPOT")]
    plan = plan_launch(template, dev_stack, "l4.yaml", reader=reader(dev_stack, google))
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
