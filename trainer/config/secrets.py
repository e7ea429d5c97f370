"""Secrets named in `VTX_SECRETS`, read from Secret Manager with the job's own identity.

`VTX_SECRETS` holds names only, never values: `ENV_NAME=SECRET[,ENV_NAME=SECRET...]` (or the same
as a JSON object), where SECRET is a secret id in the job's project (`CLOUD_ML_PROJECT_ID`) or a
full `projects/P/secrets/S[/versions/V]` name. Each value is exported as `ENV_NAME` for the
training code.

Nothing read from `VTX_SECRETS` or answered by Secret Manager is ever printed, because a mistaken
entry may hold a value (`HF_TOKEN=hf_...` for `HF_TOKEN=hf-token`): errors name an entry by its
position, or by its variable name when that is a conventional one (`HF_TOKEN`), and say what is
wrong with it; errors of the client are reduced to their kind (`NotFound`) and status code.

`SECRET_MANAGER_EMULATOR_HOST` (`host:port` or a URL) sends the requests to a Secret Manager
stand-in over REST without credentials, as `STORAGE_EMULATOR_HOST` does for GCS.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections.abc import Mapping, MutableMapping
from typing import Any

log = logging.getLogger(__name__)

SECRETS_ENV = "VTX_SECRETS"
EMULATOR_ENV = "SECRET_MANAGER_EMULATOR_HOST"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The grammar of jobs.custom_jobs.rules.environment.SECRET_NAME (the trainer ships alone;
# tests/contracts/ pins the copy).
SECRET_NAME = re.compile(
    r"^([A-Za-z0-9_-]{1,255}|projects/[^/]+/secrets/[A-Za-z0-9_-]{1,255}(/versions/[^/]+)?)$"
)
# Variable names safe to print: upper-case words of at most 16 characters (HF_TOKEN,
# WANDB_API_KEY). A key pasted where a name belongs is a long run of mixed characters.
PRINTABLE_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]{0,15}(_[A-Z0-9]{1,16})*$")


class SecretsError(ValueError):
    """A problem with `VTX_SECRETS` or a secret it names; the message holds no value."""


def _label(position: int, name: object) -> str:
    if isinstance(name, str) and PRINTABLE_ENV_NAME.match(name):
        return name
    return f"{SECRETS_ENV} entry {position}"


def _entries(raw: str) -> list[tuple[object, object]]:
    """(env name, secret) per entry, in order; malformed pairs and documents refused."""
    if raw.startswith("{"):
        try:
            refs = json.loads(raw)
        except json.JSONDecodeError as exc:
            # The decoder's message holds a position only; the document is never shown.
            raise SecretsError(
                f"{SECRETS_ENV} starts with '{{' but is not valid JSON (at character {exc.pos})"
            ) from None
        if not isinstance(refs, dict):
            raise SecretsError(f"{SECRETS_ENV} is JSON but not an object of names")
        return list(refs.items())
    entries: list[tuple[object, object]] = []
    for position, item in enumerate(raw.split(","), 1):
        name, sep, secret = item.strip().partition("=")
        if not sep:
            raise SecretsError(
                f"{SECRETS_ENV} entry {position} is not ENV_NAME=SECRET (not shown: it may be a "
                "value)"
            )
        entries.append((name.strip(), secret.strip()))
    return entries


def parse_secret_refs(raw: str) -> dict[str, str]:
    """`VTX_SECRETS` as {env name: secret reference}; SecretsError names every bad entry."""
    raw = raw.strip()
    if not raw:
        return {}
    refs: dict[str, str] = {}
    problems = []
    for position, (name, secret) in enumerate(_entries(raw), 1):
        label = _label(position, name)
        if not isinstance(name, str) or not ENV_NAME.match(name):
            problems.append(f"{label}: the part before the secret is not an env variable name")
        elif name in refs:
            problems.append(f"{label}: named twice")
        elif not isinstance(secret, str) or not SECRET_NAME.match(secret):
            problems.append(
                f"{label}: not a Secret Manager secret name (an id of letters, digits, '_' and "
                "'-', or projects/P/secrets/S[/versions/V]); not shown: it may be a value"
            )
        else:
            refs[name] = secret
    if problems:
        raise SecretsError("; ".join(problems))
    return refs


def resource_name(secret: str, project: str | None) -> str:
    """The version to read: `latest` unless the name pins one. Errors do not show `secret`."""
    if secret.startswith("projects/"):
        return secret if "/versions/" in secret else f"{secret}/versions/latest"
    if not project:
        raise SecretsError(
            "names a secret id but CLOUD_ML_PROJECT_ID is not set; write "
            "projects/PROJECT/secrets/NAME"
        )
    return f"projects/{project}/secrets/{secret}/versions/latest"


def _client(env: Mapping[str, str]) -> Any:
    with warnings.catch_warnings():
        # google.api_core warns that it will stop supporting the interpreter's Python version
        # one day: a fact about the image (trainer/Dockerfile's base), not about this job.
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\.")
        from google.cloud import secretmanager  # lazy: only jobs that use secrets pay the import

    host = env.get(EMULATOR_ENV)
    if not host:
        return secretmanager.SecretManagerServiceClient()
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials

    return secretmanager.SecretManagerServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),  # a stand-in gets no token of the job's account
        client_options=ClientOptions(api_endpoint=host if "://" in host else f"http://{host}"),
    )


# What a client error means, by its class or a base of it (gRPC's PermissionDenied is a
# Forbidden; over REST, a 403 is a Forbidden).
_FAILURES = {
    "NotFound": "the secret or that version does not exist",
    "Forbidden": "the job's service account may not read it (or it does not exist)",
    "Unauthorized": "Secret Manager did not accept the job's credentials",
}


def _failure(exc: Exception) -> str:
    """The kind of a client error, without its message: that quotes the resource name (NotFound:
    'Secret [projects/P/secrets/S] not found'), or the URL holding it (connection errors)."""
    code = getattr(exc, "code", None)
    status = f" ({int(code)})" if isinstance(code, int) else ""
    kinds = [cls.__name__ for cls in type(exc).__mro__]
    why = next((_FAILURES[k] for k in kinds if k in _FAILURES), "Secret Manager could not be read")
    return f"{type(exc).__name__}{status}: {why}"


def _access(client: Any, label: str, name: str) -> str:
    try:
        response = client.access_secret_version(name=name)
    except Exception as exc:
        raise SecretsError(f"{label}: {_failure(exc)}") from None
    try:
        return response.payload.data.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretsError(f"{label}: the secret's value is not UTF-8 text") from None


def export_secrets(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Fetch every secret named in VTX_SECRETS into `environ`; return the variable names set.

    All or nothing: every entry is checked before the first request, and `environ` changes only
    after every value was read."""
    env = os.environ if environ is None else environ
    refs = parse_secret_refs(env.get(SECRETS_ENV, ""))
    if not refs:
        return []
    project = env.get("CLOUD_ML_PROJECT_ID")
    labels = {name: _label(position, name) for position, name in enumerate(refs, 1)}
    names = {}
    for name, secret in refs.items():
        try:
            names[name] = resource_name(secret, project)
        except SecretsError as exc:
            raise SecretsError(f"{labels[name]}: {exc}") from None
    client = _client(env)
    values = {name: _access(client, labels[name], resource) for name, resource in names.items()}
    env.update(values)
    # Child processes (torchrun workers) inherit the values and must not fetch them again.
    env.pop(SECRETS_ENV, None)
    log.info("secrets exported", extra={"variables": sorted(labels.values())})
    return sorted(refs)
