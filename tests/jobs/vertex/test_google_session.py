"""Google's List calls are read to the end one way, and each client's authorized session made one
way, on first use (jobs/vertex/google_session.py)."""

from __future__ import annotations

from typing import Any

import google.auth
import pytest
from google.auth.exceptions import DefaultCredentialsError

from jobs.runs.logs import LOGGING_READ_SCOPE, CloudLoggingSource, LogsError
from jobs.vertex.google_session import NotAuthenticated, authorized_session, follow_pages


def test_each_page_is_asked_for_with_the_token_of_the_one_before() -> None:
    answers = {
        None: {"items": [1, 2], "nextPageToken": "b"},
        "b": {"items": [3], "nextPageToken": "c"},
        "c": {"items": [4]},
    }
    asked: list[dict[str, Any]] = []

    def fetch(params: dict[str, Any]) -> dict:
        asked.append(params)
        return answers[params.get("pageToken")]

    params = {"filter": "x", "pageSize": 2}
    pages = list(follow_pages(fetch, params))
    assert [item for page in pages for item in page["items"]] == [1, 2, 3, 4]
    assert asked == [
        {"filter": "x", "pageSize": 2},
        {"filter": "x", "pageSize": 2, "pageToken": "b"},
        {"filter": "x", "pageSize": 2, "pageToken": "c"},
    ]
    assert params == {"filter": "x", "pageSize": 2}  # the caller's query is left as it was


def test_an_empty_token_ends_the_list_and_nothing_is_asked_before_it_is_read() -> None:
    asked: list[dict[str, Any]] = []

    def fetch(params: dict[str, Any]) -> dict:
        asked.append(params)
        return {"items": [], "nextPageToken": ""}

    pages = follow_pages(fetch, {})
    assert asked == []  # a generator: the first call is made when the first page is wanted
    assert list(pages) == [{"items": [], "nextPageToken": ""}]
    assert len(asked) == 1


def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """google.auth.default as on a machine nobody logged in on; the scopes of each ask."""
    asked: list[list[str]] = []

    def default(scopes: list[str]) -> tuple[object, str]:
        asked.append(scopes)
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", default)
    return asked


def test_no_credentials_is_said_with_how_to_log_in(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _no_credentials(monkeypatch)
    with pytest.raises(NotAuthenticated, match="gcloud auth application-default login"):
        authorized_session("https://www.googleapis.com/auth/logging.read")
    assert asked == [["https://www.googleapis.com/auth/logging.read"]]


def test_a_client_makes_its_session_on_first_use_and_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _no_credentials(monkeypatch)
    source = CloudLoggingSource("p", lambda: [("projects/p/locations/r/customJobs/1", 1)])
    assert asked == []  # nothing asked for until a call is made
    with pytest.raises(LogsError, match="not authenticated: run `gcloud auth"):
        source.fetch(None)
    assert asked == [[LOGGING_READ_SCOPE]]


def test_a_session_given_is_the_one_used(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _no_credentials(monkeypatch)
    given = object()
    assert CloudLoggingSource("p", list, session=given).session is given
    assert asked == []
