"""The team budget's cancel function (infra/functions/budget_cancel) against the local platform:
Google's notification in, through google-auth's AuthorizedSession to Vertex's REST routes, only
the team's queued and running jobs and studies cancelled, and only past ``cancel_at`` of the
current month's spend."""

from __future__ import annotations

import ast
import base64
import json
import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession

from infra.components.team_budgets import CARRIED, source_files
from infra.functions.budget_cancel import cancel_jobs
from infra.functions.budget_cancel.cancel_jobs import NotificationError, Settings, handle
from jobs.core.stack import LABEL_TEAM, StackOutputs
from jobs.local.platform.state import LOCAL_REGION
from tests.conftest import REPO
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    tuning_job,
    wait_for,
    wait_study,
    wait_terminal,
)

FUNCTION = REPO / "infra" / "functions" / "budget_cancel"
SLEEPS = "import time; time.sleep(600)"
THIS_MONTH = datetime.now(UTC).replace(day=1, hour=8, minute=0, second=0, microsecond=0)


def message(cost: Any, amount: Any = 100.0, start: datetime = THIS_MONTH, **more) -> dict:
    """A Pub/Sub message as Cloud Billing publishes it (schema 1.0)."""
    data = {
        "budgetDisplayName": "acme-vtx-prod team nlp",
        "costAmount": cost,
        "costIntervalStart": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "budgetAmount": amount,
        "budgetAmountType": "SPECIFIED_AMOUNT",
        "currencyCode": "USD",
        **more,
    }
    return {
        "data": encoded(json.dumps(data)),
        "attributes": {
            "billingAccountId": "000000-000000-000000",
            "budgetId": "0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e",
            "schemaVersion": "1.0",
        },
    }


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def settings(platform: StackOutputs, team: str) -> Settings:
    # A further region with no jobs: the function walks every region of the stack.
    return Settings.from_env(
        {
            "VTX_PROJECT": platform.project,
            "VTX_REGIONS": f"{LOCAL_REGION},us-east4",
            "VTX_TEAM": team,
            "VTX_TEAM_LABEL": LABEL_TEAM,
            "VTX_CANCEL_AT": "1.0",
            "VTX_VERTEX_ENDPOINT": platform.vertex_endpoint or "",
        }
    )


def test_past_cancel_at_only_the_teams_running_jobs_and_studies_are_cancelled(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    team_a, team_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"

    def submit(team: str, code: str = SLEEPS) -> str:
        job = custom_job(f"team-{team}", pool(code), labels={LABEL_TEAM: team})
        return jobs.create_custom_job(parent=PARENT, custom_job=job).name

    finished = submit(team_a, "pass")
    assert wait_terminal(jobs, finished).state.name == "JOB_STATE_SUCCEEDED"
    running_a = [submit(team_a), submit(team_a)]
    running_b = submit(team_b)
    study = tuning_job(f"study-{team_a}", SLEEPS, max_trials=1, parallel=1, values=(1,))
    study.labels[LABEL_TEAM] = team_a
    study_name = jobs.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=study
    ).name
    for name in [*running_a, running_b]:
        wait_for(lambda name=name: jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING")

    session = AuthorizedSession(AnonymousCredentials())
    config = settings(local_platform, team_a)
    last_month = (THIS_MONTH - timedelta(days=1)).replace(day=1)
    for quiet in (
        message(cost=99.9),  # under: 99.9% of the budget
        message(cost=50.0, forecastThresholdExceeded=1.2),  # a forecast alone
        message(cost=250.0, start=last_month),  # over, but last month's (a late redelivery)
    ):
        assert handle(quiet, config, session) == []
    assert {jobs.get_custom_job(name=n).state.name for n in running_a} == {"JOB_STATE_RUNNING"}

    over = message(cost=100.0, alertThresholdExceeded=1.0)
    cancelled = handle(over, config, session)
    assert set(running_a) <= set(cancelled) and study_name in cancelled
    assert finished not in cancelled and running_b not in cancelled
    for name in running_a:
        assert wait_terminal(jobs, name).state.name == "JOB_STATE_CANCELLED"
    assert wait_study(jobs, study_name).state.name == "JOB_STATE_CANCELLED"
    assert jobs.get_custom_job(name=finished).state.name == "JOB_STATE_SUCCEEDED"
    assert jobs.get_custom_job(name=running_b).state.name == "JOB_STATE_RUNNING"

    # Pub/Sub delivers at least once: the same message again finds nothing left to cancel.
    assert handle(over, config, session) == []
    jobs.cancel_custom_job(name=running_b)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ("not base64!", "not base64 JSON"),
        (base64.b64encode(b"[1, 2]").decode(), "not a JSON object"),
        (base64.b64encode(b'{"costAmount": "lots"}').decode(), "costIntervalStart"),
    ],
)
def test_a_message_that_is_not_a_budget_notification_is_refused_by_name(
    data: str, fragment: str
) -> None:
    with pytest.raises(NotificationError, match=fragment):
        cancel_jobs.decode({"data": data, "attributes": {"schemaVersion": "1.0"}})


def test_the_functions_source_imports_nothing_of_the_repository_but_the_cancel_act() -> None:
    """Deployed alone: its folder and the cancel act it carries (which imports nothing of
    ours) are the whole zip."""
    ours = {"vtx", "infra", "jobs", "trainer", "bench", "tests"}
    carried = REPO / "jobs" / "control" / "cancels.py"
    for path in [*sorted(FUNCTION.glob("*.py")), carried]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            else:
                continue
            names = [n for n in names if path == carried or n != CARRIED]
            assert not [n for n in names if n.startswith(".") or n.split(".")[0] in ours], path
    assert (FUNCTION / "requirements.txt").is_file()
    assert Path(FUNCTION / "main.py").read_text().count("@functions_framework.cloud_event") == 1


def test_the_deployed_archive_imports_its_entry_point_alone(tmp_path: Path) -> None:
    """The archive as the component builds it, unpacked and first on the path: main.py
    imports, and every module of ours it loads comes from the archive, none from the
    checkout (the cancel act included)."""
    with zipfile.ZipFile(tmp_path / "source.zip", "w") as archive:
        for name, path in source_files().items():
            archive.write(path, name)
    unpacked = tmp_path / "source"
    zipfile.ZipFile(tmp_path / "source.zip").extractall(unpacked)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import main;"
        "ours = {n: m.__file__ for n, m in sys.modules.items()"
        "        if n.split('.')[0] in ('jobs', 'cancel_jobs', 'main')};"
        "assert all(f and f.startswith(sys.argv[1]) for f in ours.values()), ours;"
        "print(sorted(ours))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code, str(unpacked)], capture_output=True,
                          text=True, check=False, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = ["cancel_jobs", "jobs", "jobs.control", CARRIED, "main"]
    assert done.stdout.strip() == str(loaded)


def test_the_deployed_entry_point_cancels_through_the_functions_framework(
    local_platform: StackOutputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main.py as Cloud Functions runs it: the Functions Framework's app, one CloudEvent as
    Eventarc delivers a Pub/Sub message (binary mode), default credentials from google.auth."""
    jobs = client(local_platform.vertex_endpoint)
    team = f"e-{uuid.uuid4().hex[:8]}"
    job = custom_job(f"team-{team}", pool(SLEEPS), labels={LABEL_TEAM: team})
    name = jobs.create_custom_job(parent=PARENT, custom_job=job).name
    wait_for(lambda: jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING")

    app = function_app(local_platform, team, monkeypatch)
    body = {"message": message(cost=120.0, alertThresholdExceeded=1.0), "subscription": "s"}
    answer = app.test_client().post("/", json=body, headers=CLOUD_EVENT_HEADERS)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert wait_terminal(jobs, name).state.name == "JOB_STATE_CANCELLED"


# -- messages that must cancel nothing -----------------------------------------------------------

OVER = {"alertThresholdExceeded": 1.0}
DEEP = "[" * 200_000 + "]" * 200_000
# Each is acknowledged with one log line naming what is wrong; none may list, let alone cancel.
NOT_NOTIFICATIONS = {
    "cost NaN": (message(cost=float("nan"), **OVER), "costAmount"),
    "cost +Infinity": (message(cost=float("inf"), **OVER), "costAmount"),
    "cost -Infinity": (message(cost=float("-inf"), **OVER), "costAmount"),
    "cost negative": (message(cost=-5.0, **OVER), "costAmount"),
    "budget NaN": (message(cost=150.0, amount=float("nan"), **OVER), "budgetAmount"),
    "budget +Infinity": (message(cost=150.0, amount=float("inf")), "budgetAmount"),
    "budget -Infinity": (message(cost=150.0, amount=float("-inf"), **OVER), "budgetAmount"),
    "budget negative": (message(cost=150.0, amount=-100.0, **OVER), "budgetAmount"),
    "both negative": (message(cost=-200.0, amount=-100.0, **OVER), "costAmount"),
    "cost too large for a float": (message(cost=10**400, **OVER), "costAmount"),
    "starts next month": (
        message(cost=150.0, start=THIS_MONTH + timedelta(days=40), **OVER),
        "in the future",
    ),
    "message null": (None, "not a Pub/Sub message"),
    "message a list": ([message(cost=150.0, **OVER)], "not a Pub/Sub message"),
    "message a string": ("over budget", "not a Pub/Sub message"),
    "data a number": ({"data": 12345, "attributes": {}}, "not base64 text"),
    "data a map": ({"data": {"costAmount": 150.0}, "attributes": {}}, "not base64 text"),
    "data not base64": ({"data": "#!?", "attributes": {}}, "not base64 JSON"),
    "data not JSON": ({"data": encoded("{cost: 1"), "attributes": {}}, "not base64 JSON"),
    "data 200k deep": ({"data": encoded(DEEP), "attributes": {}}, "not base64 JSON"),
    "attributes a list": (
        {**message(cost=150.0, **OVER), "attributes": ["schemaVersion"]},
        "attributes",
    ),
    "attributes a string": ({**message(cost=150.0, **OVER), "attributes": "1.0"}, "attributes"),
}


def one_warning(out: str) -> dict:
    """The one log line a refused message leaves (Cloud Logging's JSON on stdout)."""
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0]["severity"] == "WARNING" and "nothing cancelled" in lines[0]["message"]
    return lines[0]


@pytest.fixture(scope="module")
def running_team_job(local_platform: StackOutputs) -> Iterator[tuple[str, str]]:
    """A team and its running job, which no message below may cancel."""
    jobs = client(local_platform.vertex_endpoint)
    team = f"q-{uuid.uuid4().hex[:8]}"
    job = custom_job(f"team-{team}", pool(SLEEPS), labels={LABEL_TEAM: team})
    name = jobs.create_custom_job(parent=PARENT, custom_job=job).name
    wait_for(lambda: jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING")
    yield team, name
    if jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING":  # else a test failed
        jobs.cancel_custom_job(name=name)


@pytest.mark.parametrize(
    ("bad", "fragment"), list(NOT_NOTIFICATIONS.values()), ids=list(NOT_NOTIFICATIONS)
)
def test_a_message_that_is_not_a_valid_notification_cancels_nothing(
    local_platform: StackOutputs,
    running_team_job: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    bad: Any,
    fragment: str,
) -> None:
    team, name = running_team_job
    session = AuthorizedSession(AnonymousCredentials())
    assert handle(bad, settings(local_platform, team), session) == []
    assert fragment in one_warning(capsys.readouterr().out)["message"]
    jobs = client(local_platform.vertex_endpoint)
    assert jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING"


def test_the_budget_month_is_pacific_time_daylight_saving_included(
    local_platform: StackOutputs,
    running_team_job: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """00:30 PDT on 1 July is 07:30 UTC: June's interval (from 07:00 UTC on 1 June, midnight
    PDT) is an earlier month's there, July's (from 07:00 UTC on 1 July) is this month's."""
    team, name = running_team_job
    now = datetime(2026, 7, 1, 7, 30, tzinfo=UTC)
    june = message(cost=180.0, start=datetime(2026, 6, 1, 7, tzinfo=UTC), **OVER)
    july = message(cost=180.0, start=datetime(2026, 7, 1, 7, tzinfo=UTC), **OVER)
    assert not cancel_jobs.is_current(cancel_jobs.decode(june), now)
    assert cancel_jobs.is_current(cancel_jobs.decode(july), now)
    # A winter month: midnight PST on 1 January is 08:00 UTC.
    january = datetime(2027, 1, 1, 8, 30, tzinfo=UTC)
    december = message(cost=180.0, start=datetime(2026, 12, 1, 8, tzinfo=UTC), **OVER)
    assert not cancel_jobs.is_current(cancel_jobs.decode(december), january)
    assert cancel_jobs.is_current(cancel_jobs.decode(december), january - timedelta(hours=1))

    session = AuthorizedSession(AnonymousCredentials())
    assert handle(june, settings(local_platform, team), session, now=now) == []
    assert "earlier interval" in capsys.readouterr().out
    jobs = client(local_platform.vertex_endpoint)
    assert jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING"


def function_app(platform: StackOutputs, team: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """main.py as Cloud Functions runs it: the Functions Framework's app, with the stack's
    environment and default credentials from google.auth."""
    import functions_framework
    import google.auth

    env = {
        "VTX_PROJECT": platform.project,
        "VTX_REGIONS": LOCAL_REGION,
        "VTX_TEAM": team,
        "VTX_TEAM_LABEL": LABEL_TEAM,
        "VTX_CANCEL_AT": "1.0",
        "VTX_VERTEX_ENDPOINT": platform.vertex_endpoint or "",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (AnonymousCredentials(), None))
    monkeypatch.syspath_prepend(str(FUNCTION))  # the function's folder is its whole source
    return functions_framework.create_app(
        target="on_budget_update", source=str(FUNCTION / "main.py"), signature_type="cloudevent"
    )


# Eventarc's binary-mode delivery of a Pub/Sub message.
CLOUD_EVENT_HEADERS = {
    "ce-id": "1",
    "ce-specversion": "1.0",
    "ce-source": "//pubsub.googleapis.com/projects/p/topics/t",
    "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
    "Content-Type": "application/json",
}


def test_the_deployed_entry_point_acknowledges_what_it_cannot_act_on(
    local_platform: StackOutputs,
    running_team_job: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every message above, and an event whose data is not MessagePublishedData at all, is
    answered 200 (a 500 is a redelivery, for ever) with one line, and cancels nothing."""
    team, name = running_team_job
    app = function_app(local_platform, team, monkeypatch).test_client()
    capsys.readouterr()
    bodies = [{"message": bad, "subscription": "s"} for bad, _ in NOT_NOTIFICATIONS.values()]
    for body in [*bodies, ["not", "an", "envelope"], "a string"]:
        answer = app.post("/", data=json.dumps(body), headers=CLOUD_EVENT_HEADERS)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        one_warning(capsys.readouterr().out)
    jobs = client(local_platform.vertex_endpoint)
    assert jobs.get_custom_job(name=name).state.name == "JOB_STATE_RUNNING"
