"""Checks on credentials and the identities workloads run as.

No long-lived keys (service account, HMAC and API keys), nothing that names the Compute Engine
default account (Editor on new projects), jobs that run as a dedicated account, KMS keys rotated
at least every 90 days, and no secret values in the Pulumi state.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import UNKNOWN

DEFAULT_COMPUTE_ACCOUNT = re.compile(
    r"(?:serviceAccount:)?\d+-compute@developer\.gserviceaccount\.com"
)
STACK = "pulumi:pulumi:Stack"
CREDENTIAL_TYPES = frozenset(
    {"gcp:serviceaccount/key:Key", "gcp:storage/hmacKey:HmacKey", "gcp:projects/apiKey:ApiKey"}
)
SECRET_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"
KMS_MAX_ROTATION_S = 90 * 24 * 3600  # CIS GCP 1.10: rotate at least every 90 days


def no_service_account_keys(
    resource_type: str, _props: Mapping[str, Any], __: RuleContext
) -> list[str]:
    if resource_type in CREDENTIAL_TYPES:
        return [f"{resource_type} creates a long-lived credential that can leak"]
    return []


def _strings(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def no_default_compute_identity(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    """The Compute Engine default account is Editor on new projects: nothing may use or trust it."""
    return [
        f"{path} names the Compute Engine default account {value}"
        for path, value in _strings(props)
        if DEFAULT_COMPUTE_ACCOUNT.fullmatch(value)
    ]


def trainer_not_default_compute(
    resources: Sequence[StackResource], _: RuleContext
) -> list[tuple[str, str | None]]:
    """Jobs run as ``platform.trainer_service_account``: it must be a dedicated account."""
    violations: list[tuple[str, str | None]] = []
    for resource in resources:
        if resource.type != STACK:
            continue
        platform = resource.props.get("platform")
        account = platform.get("trainer_service_account") if isinstance(platform, Mapping) else None
        if isinstance(account, str) and DEFAULT_COMPUTE_ACCOUNT.fullmatch(account):
            violations.append(
                (f"platform.trainer_service_account is the Compute Engine default {account}", None)
            )
    return violations


def kms_key_rotation(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """CIS GCP 1.10: keys rotate at least every 90 days."""
    if resource_type != CRYPTO_KEY:
        return []
    period = props.get("rotationPeriod")
    if not period:
        return ["no rotationPeriod: the key is never rotated"]
    if period == UNKNOWN:
        return []
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(period).strip())
    if match is None:
        return [f"rotationPeriod {period!r} is not a duration in seconds such as '7776000s'"]
    if float(match.group(1)) > KMS_MAX_ROTATION_S:
        return [f"rotationPeriod {period} is longer than 90 days ({KMS_MAX_ROTATION_S}s)"]
    return []


def no_secret_values_in_state(
    resource_type: str, _props: Mapping[str, Any], __: RuleContext
) -> list[str]:
    if resource_type == SECRET_VERSION:
        return ["a SecretVersion puts the secret value in the Pulumi state"]
    return []
