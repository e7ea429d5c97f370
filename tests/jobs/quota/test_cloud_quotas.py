"""The live quota preflight (jobs/quota/cloud_quotas.py) against a real HTTP server on 127.0.0.1
that serves
Cloud Quotas' quotaInfos.list and Vertex's customJobs.list in Google's JSON shape (the fields of
the v1 references; the figures and the CPU quota id are made up for the tests)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs
from jobs.quota.cloud_quotas import (
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
from tests.jobs.quota.quota_fakes import (
    L4,
    L4_SPOT,
    PAGE,
    PREFIX,
    QUOTA_INFOS,
    FakeGoogle,
    reader,
    rest_job,
)

H100 = f"{PREFIX}nvidia_h100_gpus"

CPUS = f"{PREFIX}cpus"


def test_reader_follows_every_page_of_the_projects_quota_infos(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    infos = reader(quota_stack, google).quota_infos()
    assert [i["quotaId"] for i in infos] == [i["quotaId"] for i in QUOTA_INFOS]
    paths = {path for path, _, _ in google.requests}
    assert paths == {
        "/v1/projects/vtx-dev-123/locations/global/services/aiplatform.googleapis.com/quotaInfos"
    }
    assert len(google.requests) == -(-len(QUOTA_INFOS) // PAGE)


def test_a_local_stack_reads_its_endpoint_with_the_platforms_token(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    local = quota_stack.model_copy(update={"vertex_endpoint": google.url, "local_token": "t0k"})
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
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    google.jobs["us-central1"] = [
        rest_job("JOB_STATE_RUNNING", 1),
        rest_job("JOB_STATE_CANCELLED", 1),
    ]
    jobs = reader(quota_stack, google).jobs("us-central1")
    assert [j["state"] for j in jobs] == ["JOB_STATE_RUNNING"]
    path, query, _ = google.requests[-1]
    assert path == "/v1/projects/vtx-dev-123/locations/us-central1/customJobs"
    assert 'state!="JOB_STATE_CANCELLED"' in query["filter"]


def test_the_filter_leaves_out_every_final_state_and_only_those(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    """A job holds quota until it has ended, in any of v1's five final states."""
    google.jobs["us-central1"] = [
        rest_job("JOB_STATE_EXPIRED", 1),
        rest_job("JOB_STATE_PARTIALLY_SUCCEEDED", 1),
        rest_job("JOB_STATE_PAUSED", 1),
    ]
    jobs = reader(quota_stack, google).jobs("us-central1")
    assert [j["state"] for j in jobs] == ["JOB_STATE_PAUSED"]
    _, query, _ = google.requests[-1]
    assert query["filter"] == (
        'state!="JOB_STATE_CANCELLED" AND state!="JOB_STATE_EXPIRED" AND '
        'state!="JOB_STATE_FAILED" AND state!="JOB_STATE_PARTIALLY_SUCCEEDED" AND '
        'state!="JOB_STATE_SUCCEEDED"'
    )


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
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    check = preflight({H100: 8}, "us-central1", reader(quota_stack, google), load_catalog())
    (over,) = check.over_limit
    assert over.limit == 0 and over.preference is not None
    assert over.preference.stanza == (
        "{accelerator: NVIDIA_H100_80GB, count: 8, spot: false, region: us-central1}"
    )


def test_read_regions_reads_the_quota_once_and_each_regions_jobs(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    google.jobs["us-east4"] = [rest_job("JOB_STATE_RUNNING", 3)]
    central, east = read_regions(
        reader(quota_stack, google), ["us-central1", "us-east4"], load_catalog()
    )
    assert central.in_use == {} and east.in_use[L4] == 4
    assert (central.limits[L4].limit, east.limits[L4].limit) == (8, 4)
    quota_reads = [p for p, _, _ in google.requests if p.endswith("/quotaInfos")]
    assert len(quota_reads) == -(-len(QUOTA_INFOS) // PAGE)


def test_an_api_error_skips_the_check_with_its_reason(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    google.status = 403
    check = preflight({L4: 1}, "us-central1", reader(quota_stack, google), load_catalog())
    assert check.skipped is not None and "HTTP 403 caller lacks permission" in check.skipped
    assert check.metrics == [] and not check.over_limit


def test_an_unreachable_quota_api_skips_the_check_with_its_reason(
    quota_stack: StackOutputs,
) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        url = f"http://127.0.0.1:{closed.server_address[1]}"
    unreachable = QuotaReader(quota_stack, session=requests.Session(), endpoint=url)
    check = preflight({L4: 1}, "us-central1", unreachable, load_catalog())
    assert check.skipped is not None and check.skipped.startswith(f"cannot reach {url}")


def test_an_answer_that_is_not_a_json_object_skips_the_check(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    google.raw = b"<html>captive portal</html>"
    check = preflight({L4: 1}, "us-central1", reader(quota_stack, google), load_catalog())
    assert check.skipped is not None and "did not answer with a JSON object" in check.skipped
