"""What a job on a stack with no route to the internet (``network.egress: none``) would try to
reach and cannot: the warnings of `vtx validate --stack`.

Such a stack's jobs reach Google APIs, Cloud Storage and Artifact Registry only. Three habits of
an open stack then fail at run time, minutes into a paid job, so validation names them first:

- a command that pip-installs from PyPI (``pip install``, ``python -m pip install``,
  ``uv pip install`` without an index on ``*.pkg.dev``), or a Python package job (Vertex's
  executor pip-installs the package's dependencies) without ``PIP_INDEX_URL`` on ``*.pkg.dev``;
- an image from elsewhere than the stack's registry, its Docker Hub mirror (``docker_mirror``)
  or Google's Vertex images;
- a trainer config whose ``model.name_or_path`` or ``model.tokenizer`` is a Hugging Face Hub id
  rather than a ``gs://`` prefix: the warning names `vtx model mirror`, which copies it into the
  models bucket.

Warnings, not problems: the job is valid, and a team may have mirrored what it needs another way
(a pip config baked into the image, say). The trainer config is read where the job's args name
it (``--config PATH``, relative to the working directory, as the image's working directory is
the repository's root), then its ``--set model.KEY=VALUE`` overrides.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jobs.core.problems import Problem
from jobs.core.safe_yaml import YamlInputError, read_yaml_file
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.policies import GOOGLE_VERTEX_IMAGE_PREFIXES, worker_pools

PIP_INSTALL = re.compile(r"\b(?:pip3?|python3?\s+-m\s+pip|uv\s+pip)\s+install\b")
PRIVATE_INDEX = re.compile(r"https://[a-z0-9-]+-python\.pkg\.dev/\S+")
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
MODEL_KEYS = ("name_or_path", "tokenizer")


def _env(pool: Mapping[str, Any], spec_key: str) -> dict[str, str]:
    entries = (pool.get(spec_key) or {}).get("env") or []
    return {
        str(e.get("name")): str(e.get("value", ""))
        for e in entries
        if isinstance(e, Mapping) and e.get("name")
    }


def _command_line(spec: Mapping[str, Any]) -> list[str]:
    return [str(part) for key in ("command", "args") for part in spec.get(key) or []]


def _index_hint(stack: StackOutputs) -> str:
    """The stack's PyPI remote when it exports one, else the shape of such a URL."""
    return stack.python_index or "https://REGION-python.pkg.dev/PROJECT/REPO/simple/"


def _pip_from_pypi(index: int, pool: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    spec = pool.get("containerSpec") or {}
    line = " ".join(_command_line(spec))
    has_index = PRIVATE_INDEX.search(_env(pool, "containerSpec").get("PIP_INDEX_URL", ""))
    if PIP_INSTALL.search(line) and not PRIVATE_INDEX.search(line) and not has_index:
        yield Problem(
            f"jobSpec.workerPoolSpecs[{index}].containerSpec.command",
            "pip-installs from PyPI, which a stack with network.egress none cannot reach",
            "bake the packages into the image, or install from the stack's PyPI remote "
            f"(--index-url {_index_hint(stack)}, or env PIP_INDEX_URL)",
        )
    package = pool.get("pythonPackageSpec")
    python_index = _env(pool, "pythonPackageSpec").get("PIP_INDEX_URL", "")
    if isinstance(package, Mapping) and not PRIVATE_INDEX.search(python_index):
        yield Problem(
            f"jobSpec.workerPoolSpecs[{index}].pythonPackageSpec",
            "Vertex pip-installs the package's dependencies from PyPI, which a stack with "
            "network.egress none cannot reach",
            f"set env PIP_INDEX_URL to {_index_hint(stack)}, or use a container image "
            f"from {stack.artifact_registry} with the packages in it",
        )


def _foreign_images(index: int, pool: Mapping[str, Any], stack: StackOutputs) -> Iterator[Problem]:
    registry = stack.artifact_registry
    mirror = (stack.docker_mirror.rstrip("/") + "/",) if stack.docker_mirror else ()
    allowed = (registry.rstrip("/") + "/", *mirror, *GOOGLE_VERTEX_IMAGE_PREFIXES)
    for spec_key, image_key in (
        ("containerSpec", "imageUri"),
        ("pythonPackageSpec", "executorImageUri"),
    ):
        image = (pool.get(spec_key) or {}).get(image_key)
        if image and not str(image).startswith(allowed):
            yield Problem(
                f"jobSpec.workerPoolSpecs[{index}].{spec_key}.{image_key}",
                f"image {image!r} is not from the stack's registry: with network.egress none "
                "only Artifact Registry (and Container Registry) are reachable",
                f"push it to {registry}/ and reference it from there"
                + (
                    f", or pull a Docker Hub image as {stack.docker_mirror}/IMAGE" if mirror else ""
                ),
            )


def _option_values(args: list[str], option: str) -> Iterator[str]:
    """Every value of ``--option VALUE`` and ``--option=VALUE`` in ``args``."""
    for position, arg in enumerate(args):
        if arg == option and position + 1 < len(args):
            yield args[position + 1]
        elif arg.startswith(f"{option}="):
            yield arg.removeprefix(f"{option}=")


def _model_refs(args: list[str], cwd: Path) -> dict[str, tuple[str, str, Path]]:
    """model.KEY -> (value, where it was set, the folder a relative path is read from), from
    the trainer config and its ``--set`` overrides."""
    found: dict[str, tuple[str, str, Path]] = {}
    for config in _option_values(args, "--config"):
        try:
            document = read_yaml_file(cwd / config)
        except YamlInputError:
            continue  # not on this machine: the image may hold it; nothing to judge
        model = document.get("model") if isinstance(document, Mapping) else None
        for key in MODEL_KEYS:
            value = model.get(key) if isinstance(model, Mapping) else None
            if isinstance(value, str):
                found[key] = (value, f"{config}: model.{key}", (cwd / config).parent)
    for override in _option_values(args, "--set"):
        key, _, value = override.partition("=")
        if key.startswith("model.") and key.removeprefix("model.") in MODEL_KEYS:
            found[key.removeprefix("model.")] = (value, f"--set {key}", cwd)
    return found


def _words(spec: Mapping[str, Any]) -> list[str]:
    """The container's command line as words, a shell command (``sh -c "..."``) split too."""
    words = []
    for part in _command_line(spec):
        try:
            words += shlex.split(part) if " " in part else [part]
        except ValueError:  # unbalanced quotes: not a command line to read
            words.append(part)
    return words


def _hub_models(
    index: int, pool: Mapping[str, Any], stack: StackOutputs, cwd: Path
) -> Iterator[Problem]:
    words = _words(pool.get("containerSpec") or {})
    for key, (value, where, base) in _model_refs(words, cwd).items():
        if "://" in value or not HUB_ID.fullmatch(value) or (base / value).exists():
            continue
        yield Problem(
            f"jobSpec.workerPoolSpecs[{index}].containerSpec.args",
            f"{where} is {value!r}, a Hugging Face Hub id: a stack with network.egress none "
            "cannot reach the Hub",
            f"`vtx model mirror {value} --stack <stack>` copies it to "
            f"gs://{stack.buckets.models}/{value}; name that prefix as model.{key}",
        )


def egress_warnings(
    job: Mapping[str, Any], stack: StackOutputs, cwd: Path = Path()
) -> list[Problem]:
    """What a REST CustomJob would reach for and cannot, on a stack whose egress is closed;
    [] on any other stack."""
    if stack.egress != "none":
        return []
    warnings: list[Problem] = []
    for index, pool in worker_pools(job):
        warnings += _pip_from_pypi(index, pool, stack)
        warnings += _foreign_images(index, pool, stack)
        warnings += _hub_models(index, pool, stack, cwd)
    return warnings
