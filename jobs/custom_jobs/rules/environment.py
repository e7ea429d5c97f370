"""Rules on a replica's environment: variable names, counts, what Vertex reserves, and secrets,
which are named in Secret Manager and never written in plain text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from jobs.core.catalog import Catalog
from jobs.core.contract import VTX_SECRETS_ENV
from jobs.core.credentials import (
    COMMIT_HINT,
    WANDB_KEY,
    looks_like_credential_name,
    looks_like_key,
    shape_of,
)
from jobs.core.gcs_names import gcs_folder_problem
from jobs.core.problems import Problem
from jobs.core.user_io import load_json_text
from jobs.custom_jobs.facts import JobFacts

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Variables Vertex sets itself (docs/vertex-facts.md, "Training container environment"): a
# template that sets them would hide the platform's values from the trainer.
RESERVED_ENV = re.compile(
    r"^(AIP_\w+|CLUSTER_SPEC|TF_CONFIG|MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|CLOUD_ML_\w+)$"
)


def _secrets_hint(name: str) -> str:
    secret = name.lower().replace("_", "-")
    return f"`secrets: {{{name}: {secret}}}` (a Secret Manager secret name), not env"


def env_count(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.env_vars_max
    for pool in job.pools:
        if len(pool.env) > limit:
            yield Problem(
                pool.path("env"),
                f"{len(pool.env)} environment variables; Vertex accepts at most {limit}",
                "move configuration into a config file or args",
            )


def env_names_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.env_name_max_chars
    for pool in job.pools:
        for name, _, path in pool.env:
            if not name:
                hint = "e.g. name: MY_VAR" if job.rest else "e.g. MY_VAR: value"
                yield Problem(path, "environment variable without a name", hint)
            elif not ENV_NAME.match(name):
                fixed = re.sub(r"\W", "_", name).upper()
                if not ENV_NAME.match(fixed):  # empty, or starts with a digit
                    fixed = f"_{fixed}" if fixed else "MY_VAR"
                yield Problem(path, f"invalid environment variable name {name!r}", f"e.g. {fixed}")
            elif len(name) > limit:
                yield Problem(path, f"environment variable name longer than {limit}", "shorten it")


def env_names_unique(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        counts = Counter(name for name, _, _ in pool.env)
        seen: set[str] = set()
        for name, _, path in pool.env:
            if counts[name] > 1 and name in seen:
                yield Problem(path, f"environment variable {name} is set twice", "keep one")
            seen.add(name)
        for name in job.secret_env:
            if name in counts:
                yield Problem(
                    f"{job.path('secrets')}.{name}",
                    f"{name} is both in env and in secrets",
                    "keep it only in secrets",
                )


def env_not_reserved(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        for name, _, path in pool.env:
            if RESERVED_ENV.match(name):
                yield Problem(
                    path,
                    f"{name} is set by Vertex itself; setting it hides the platform's value",
                    "remove it (the stack sets baseOutputDirectory, which sets AIP_*_DIR)",
                )


def no_plaintext_secrets(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """Env entries that hold a credential: by name (HF_TOKEN) or by the shape of the value,
    judged with the variable's name (a GIT_COMMIT of 40 hex digits is a commit). Every other
    string of the job is judged by `secret_values.no_secret_shaped_values`."""
    for pool in job.pools:
        for name, value, path in pool.env:
            if name == VTX_SECRETS_ENV or not value:
                continue
            if name == "GOOGLE_APPLICATION_CREDENTIALS":
                yield Problem(
                    path,
                    "service account key files are not used: the job runs as the stack's "
                    "trainer service account",
                    "remove GOOGLE_APPLICATION_CREDENTIALS",
                )
            elif looks_like_credential_name(name):
                yield Problem(
                    path, f"{name} looks like a credential in plain text", _secrets_hint(name)
                )
            elif shape := shape_of(value, name):
                hint = _secrets_hint(name)
                yield Problem(
                    path,
                    f"the value of {name} has the shape of {shape.name}",
                    f"{hint}; {COMMIT_HINT}" if shape is WANDB_KEY else hint,
                )


SECRET_NAME = re.compile(
    r"^([A-Za-z0-9_-]{1,255}|projects/[^/]+/secrets/[A-Za-z0-9_-]{1,255}(/versions/[^/]+)?)$"
)
"""A Secret Manager secret id, or its full resource name (optionally a version)."""


def _secret_ref_problems(path: str, env_name: str, ref: object, who: str = "") -> Iterator[Problem]:
    """Problems of one reference; ``who`` names the entry where ``path`` does not."""
    name = env_name.lower().replace("_", "-")
    hint = (
        f"secrets: {{{env_name}: {name}}}, after storing the value in Secret Manager "
        f"(`gcloud secrets create {name} --data-file=-`)"
    )
    if isinstance(ref, str) and looks_like_key(ref):
        yield Problem(path, f"{who}this looks like the secret's value, not its name", hint)
    elif not isinstance(ref, str) or not SECRET_NAME.match(ref):
        yield Problem(
            path,
            f"{who}not a Secret Manager secret name (letters, digits, '_' and '-', at most 255)",
            hint,
        )


_VTX_SECRETS_HINT = (
    "names only: ENV_NAME=SECRET_ID[,...] or a JSON object of them (a vtx template writes it "
    "from `secrets:`)"
)


def _vtx_secrets_problems(raw: str, path: str) -> Iterator[Problem]:
    """What the trainer would refuse in a REST job's VTX_SECRETS (see trainer/config/secrets.py)."""
    raw = raw.strip()
    entries: list[tuple[int, object, object]] = []
    if raw.startswith("{"):
        try:
            refs = load_json_text(raw)
        except ValueError:  # not JSON, or nested past the parser
            refs = None
        if not isinstance(refs, dict):
            yield Problem(path, f"{VTX_SECRETS_ENV} is not a JSON object", _VTX_SECRETS_HINT)
            return
        entries = [(i, name, ref) for i, (name, ref) in enumerate(refs.items(), 1)]
    elif raw:
        for i, item in enumerate(raw.split(","), 1):
            name, sep, ref = item.strip().partition("=")
            if sep:
                entries.append((i, name.strip(), ref.strip()))
            else:
                yield Problem(
                    path, f"{VTX_SECRETS_ENV} entry {i} is not ENV_NAME=SECRET", _VTX_SECRETS_HINT
                )
    for i, name, ref in entries:
        if not isinstance(name, str) or not ENV_NAME.match(name) or looks_like_key(name):
            yield Problem(
                path,
                f"{VTX_SECRETS_ENV} entry {i} does not start with an environment variable name",
                _VTX_SECRETS_HINT,
            )
        else:
            yield from _secret_ref_problems(path, name, ref, f"{VTX_SECRETS_ENV} {name}: ")


def secret_names_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """``secrets:`` maps env names to secret *names*; a value written there would travel in
    the job's VTX_SECRETS as plain text. Neither is echoed back. A REST job carries the same
    names in its VTX_SECRETS variable: that is checked as the trainer will read it."""
    for env_name, secret in job.secret_env.items():
        if looks_like_key(env_name):
            yield Problem(
                job.path("secrets"),
                "a name under secrets looks like a key, not an environment variable",
                "secrets: {ENV_NAME: secret-id}",
            )
        elif not ENV_NAME.match(env_name):
            fixed = re.sub(r"\W", "_", env_name).upper()
            yield Problem(
                f"{job.path('secrets')}.{env_name}",
                f"invalid environment variable name {env_name!r}",
                f"e.g. {fixed if ENV_NAME.match(fixed) else 'MY_TOKEN'}",
            )
        else:
            yield from _secret_ref_problems(f"{job.path('secrets')}.{env_name}", env_name, secret)
    seen: set[str] = set()  # a template's shared env reaches every pool with one path
    for pool in job.pools:
        for name, value, path in pool.env:
            if name == VTX_SECRETS_ENV and path not in seen:
                seen.add(path)
                yield from _vtx_secrets_problems(value, path)


def env_values_startable(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """A NUL character cannot be in a process's environment: the replica would never start.
    The value is not echoed (it may be a secret's)."""
    for pool in job.pools:
        for name, value, path in pool.env:
            if "\x00" in value:
                yield Problem(
                    f"{path}.value" if job.rest else path,
                    f"the value of {name or 'this variable'} holds a NUL character, which no "
                    f"process environment can carry",
                    "remove it",
                )


def output_dir_is_a_gcs_folder(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """Replicas get baseOutputDirectory as AIP_MODEL_DIR and friends: checkpoints and the model
    must outlive the VM, in a folder of a real bucket (the local platform answers the same)."""
    problem = gcs_folder_problem(job.output_dir) if job.output_dir else None
    if problem:
        yield Problem(
            job.path("output_dir"),
            problem,
            "leave it out: vtx launch sets gs://<checkpoints bucket>/runs/<run-id>/",
        )
