"""Secrets named in `VTX_SECRETS`, read from Secret Manager with the job's own identity.

`VTX_SECRETS` holds names only, never values: `ENV_NAME=SECRET[,ENV_NAME=SECRET...]` (or the same
as a JSON object), where SECRET is a secret id in the job's project (`CLOUD_ML_PROJECT_ID`) or a
full `projects/P/secrets/S[/versions/V]` name. Each value is exported as `ENV_NAME` for the
training code; values are never logged, only the variable names.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import MutableMapping

log = logging.getLogger(__name__)

SECRETS_ENV = "VTX_SECRETS"


def parse_secret_refs(raw: str) -> dict[str, str]:
    """`VTX_SECRETS` as {env name: secret reference}."""
    raw = raw.strip()
    if not raw:
        return {}
    if raw.startswith("{"):
        refs = json.loads(raw)
        return {str(k): str(v) for k, v in refs.items()}
    refs = {}
    for item in raw.split(","):
        name, sep, secret = item.strip().partition("=")
        if not sep or not name or not secret:
            raise ValueError(f"{SECRETS_ENV}: expected ENV_NAME=SECRET, got {item.strip()!r}")
        refs[name] = secret
    return refs


def resource_name(secret: str, project: str | None) -> str:
    if secret.startswith("projects/"):
        return secret if "/versions/" in secret else f"{secret}/versions/latest"
    if not project:
        raise ValueError(
            f"secret {secret!r} is not a full resource name and CLOUD_ML_PROJECT_ID is not set; "
            "write projects/PROJECT/secrets/NAME"
        )
    return f"projects/{project}/secrets/{secret}/versions/latest"


def export_secrets(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Fetch every secret named in VTX_SECRETS into `environ`; return the variable names set."""
    env = os.environ if environ is None else environ
    refs = parse_secret_refs(env.get(SECRETS_ENV, ""))
    if not refs:
        return []
    from google.cloud import secretmanager  # lazy: only jobs that use secrets pay the import

    client = secretmanager.SecretManagerServiceClient()
    project = env.get("CLOUD_ML_PROJECT_ID")
    for name, secret in refs.items():
        response = client.access_secret_version(name=resource_name(secret, project))
        env[name] = response.payload.data.decode("utf-8")
    # Child processes (torchrun workers) inherit the values and must not fetch them again.
    env.pop(SECRETS_ENV, None)
    log.info("secrets exported", extra={"variables": sorted(refs)})
    return sorted(refs)
