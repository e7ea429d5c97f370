"""Entry point of the team budget's cancel function: Cloud Functions (2nd gen) calls
``on_budget_update`` with the CloudEvent of each message on the team's budget topic.

Deployed alone (this folder is the function's source, with the one module of ours it carries,
``jobs/control/cancels.py``: ``infra/components/team_budgets.py``); what it does lives in
``cancel_jobs.py``, which the tests run against the local platform."""

from __future__ import annotations

import functions_framework
import google.auth
from cancel_jobs import Settings, handle, message_of
from cloudevents.http import CloudEvent
from google.auth.transport.requests import AuthorizedSession

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@functions_framework.cloud_event
def on_budget_update(event: CloudEvent) -> None:
    """One budget notification: cancel the team's jobs when it is over ``cancel_at``. An error
    raised here makes Eventarc deliver the message again (the trigger retries), so a message
    that is not a notification is not an error: ``handle`` logs why and returns."""
    credentials, _ = google.auth.default(scopes=SCOPES)
    handle(message_of(event.data), Settings.from_env(), AuthorizedSession(credentials))
