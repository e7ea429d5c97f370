"""One HTTP session for the REST calls vtx makes without Google's gRPC clients (watching jobs,
reading quota): both the local platform and Google's endpoints answer them the same way; the
one way their List calls are read to the end, page by page; and what their errors say."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jobs.core.stack import StackOutputs

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class NotAuthenticated(Exception):
    """No application-default credentials: the message says how to get them."""


def rest_session(stack: StackOutputs) -> Any:
    """The local platform takes its own token; Google's endpoints want default credentials."""
    import requests

    if stack.is_local:
        session = requests.Session()
        if stack.local_token:
            session.headers["Authorization"] = f"Bearer {stack.local_token}"
        return session
    return authorized_session(CLOUD_PLATFORM_SCOPE)


def authorized_session(scope: str) -> Any:
    """google-auth's AuthorizedSession over application-default credentials for ``scope`` (it
    refreshes a lapsed token and retries the call itself); NotAuthenticated, saying how to log
    in, when there are none. Each client makes its session on first use, so that a command that
    calls no Google API imports neither google-auth nor requests."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=[scope])
    except DefaultCredentialsError as exc:
        raise NotAuthenticated(
            f"not authenticated: run `gcloud auth application-default login` ({exc})"
        ) from exc
    return AuthorizedSession(credentials)


def storage_client(stack: StackOutputs) -> Any:
    """google-cloud-storage for the stack: the local platform's emulator anonymously, GCS with
    application-default credentials."""
    from google.cloud import storage

    if stack.gcs_endpoint:
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(
            project=stack.project,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": stack.gcs_endpoint},
        )
    return storage.Client(project=stack.project)


Page = Mapping[str, Any]


def follow_pages(fetch: Callable[[dict[str, Any]], Page], params: dict[str, Any]) -> Iterator[Page]:
    """Each page of a Google List call (Vertex, Cloud Quotas, Cloud Logging, GCS's JSON API):
    ``fetch(params)`` makes one call, and the next carries the page's ``nextPageToken`` as
    ``pageToken``, until a page has none. ``params`` (query or body) is not changed."""
    while True:
        page = fetch(params)
        yield page
        token = page.get("nextPageToken")
        if not token:
            return
        params = {**params, "pageToken": token}


def error_said(response: Any) -> str | None:
    """The message of Google's error shape ``{"error": {"message"}}`` (Vertex, Cloud Quotas, and
    what Vertex relays from a serving container); None when the body is not that shape."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return None
