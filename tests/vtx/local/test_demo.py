"""`vtx demo`, shortened: the smoke template's two replicas train the tiny LoRA model, one is
preempted after the first committed checkpoint, the job resumes and finishes, the summary is
read back from the logs, the run's model is registered, deployed and asked once, the run's goodput
line and report end it, and nothing is left running."""

from __future__ import annotations

import io
import re
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from jobs.local.platform.state import running_state
from jobs.local.plumbing.processes import stop_platform
from vtx.demo.training import run_demo, summarize


def _processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(text in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.mark.slow(cost_s=70)
def test_shortened_demo_survives_its_preemption_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    data_dir = tmp_path / "local"
    # The demo refreshes the local stand-in's prices: into a folder of its own, not the one the
    # session's other tests read (a test of an unpriced local deploy ran after it).
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path / "prices"))
    out = io.StringIO()
    result = run_demo(
        data_dir,
        Console(file=out, width=200),
        keep_up=True,  # to look into the emulator before stopping it below
        preview=False,
        trainer_overrides=["max_steps=16", "save_steps=4", "logging_steps=2", "eval_steps=8"],
    )
    state = running_state(data_dir)
    assert state is not None
    try:
        summary = result.summary
        assert result.state == "JOB_STATE_SUCCEEDED", out.getvalue()[-3000:]
        # Spot T4s are stocked out in us-central1: the ladder moved the run to us-east4.
        assert result.attempts == "us-central1 FAILED (STOCKOUT) -> us-east4 SUCCEEDED"
        assert summary.steps == summary.total_steps == 16
        assert summary.final_loss is not None
        assert summary.preempted_at is not None and summary.job_restarts == 1
        assert summary.resumed_from is not None and summary.resumed_from >= 4
        assert summary.steps_lost == 0  # SIGTERM made every rank checkpoint before exiting
        assert summary.checkpoints and summary.checkpoints[-1] == 16
        assert summary.model_dir and summary.model_dir.startswith("gs://vtx-local-checkpoints/")
        bucket, prefix = summary.model_dir.removeprefix("gs://").split("/", 1)
        client = storage.Client(
            project="vtx-local",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": state.gcs_endpoint},
        )
        assert list(client.list_blobs(bucket, prefix=prefix))
        assert "demo summary" in out.getvalue()
        # The demo refreshed the local stand-in's prices: the plan prices every rung.
        text = " ".join(out.getvalue().replace("│", " ").replace("┃", " ").split())
        assert "vtx prices refresh --stack local:" in text
        for region in ("us-central1", "us-east4"):
            assert re.search(rf"{region} 1xT4\+1xT4 SPOT \$\d+\.\d\d/h", text), text[:4000]
        # Then the run's model was registered, deployed, asked once and undeployed.
        served = result.served
        assert served is not None, (result.serve_error, out.getvalue()[-3000:])
        assert served.prediction and "@1" in served.model
        assert set(served.seconds) == {"upload", "deploy", "predict", "undeploy"}
        assert "generated (at most 16 tokens)" in out.getvalue()
        # It ends with the run's goodput: its line last, its report written where it says.
        assert out.getvalue().rstrip().splitlines()[-1].startswith("goodput: ")
        assert "0 step(s) computed again" in out.getvalue()
        assert result.report is not None and f"report: {result.report}" in out.getvalue()
        page = result.report.read_text()
        assert page.count('class="lane"') == 2 and page.count('class="rung-move"') == 1
    finally:
        stop_platform(data_dir)
    assert running_state(data_dir) is None
    assert _processes_mentioning(str(data_dir)) == []


def test_summary_counts_lost_steps_from_the_logs() -> None:
    def rank0(ts: str, **fields: object) -> dict:
        import json

        return {"timestamp": ts, "replica": "workerpool0-0", "message": json.dumps(fields)}

    service = {"replica": "service"}
    entries = [
        rank0("2026-01-01T00:00:00Z", message="training", step=0, total_steps=30, rank=0),
        rank0("2026-01-01T00:00:01Z", message="train", step=10, loss=3.0, rank=0),
        rank0("2026-01-01T00:00:02Z", message="checkpoint committed", step=10, rank=0),
        rank0("2026-01-01T00:00:03Z", message="train", step=12, loss=2.9, rank=0),
        {**service, "timestamp": "2026-01-01T00:00:04Z", "message": "preempting workerpool1-0"},
        {
            **service,
            "timestamp": "2026-01-01T00:00:05Z",
            "message": "restarting every replica (restart 1)",
        },
        rank0("2026-01-01T00:00:14Z", message="resumed", step=10, rank=0),
        rank0("2026-01-01T00:00:20Z", message="train", step=30, loss=2.0, rank=0),
        rank0("2026-01-01T00:00:21Z", message="done", step=30, model_dir="gs://m/model/", rank=0),
    ]
    summary = summarize(entries)
    assert (summary.steps, summary.final_loss, summary.model_dir) == (30, 2.0, "gs://m/model/")
    assert summary.checkpoints == [10]
    assert (summary.step_before_preemption, summary.resumed_from) == (12, 10)
    assert summary.steps_lost == 2
    assert summary.restart_s == 10.0
    assert summary.job_restarts == 1
