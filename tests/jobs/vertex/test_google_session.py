"""Google's List calls are read to the end one way (jobs/vertex/google_session.py)."""

from __future__ import annotations

from typing import Any

from jobs.vertex.google_session import follow_pages


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
