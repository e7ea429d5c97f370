"""Text forms of a compiled CustomJob: the CustomJobSpec YAML that `gcloud ai custom-jobs create
--config` takes, and the whole CustomJob as REST JSON (what the API receives); the same two for a
study's HyperparameterTuningJob (`gcloud ai hp-tuning-jobs create --config`)."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

import yaml

from jobs.core.stack import StackOutputs
from jobs.tuning.study_job import tuning_job_rest

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1


def rest_dict(job: aiplatform_v1.CustomJob) -> dict[str, Any]:
    """camelCase, enums by name, int64 as strings, durations as "Ns"; no default values."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    return json_format.MessageToDict(aiplatform_v1.CustomJob.pb(job))


def render_json(job: aiplatform_v1.CustomJob) -> str:
    return json.dumps(rest_dict(job), indent=2) + "\n"


def gcloud_command(job: dict[str, Any], stack: StackOutputs, config: str = "job.yaml") -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(job.get("labels", {}).items()))
    parts = [
        "gcloud", "ai", "custom-jobs", "create",
        f"--project={stack.project}", f"--region={stack.region}",
        f"--display-name={job['displayName']}", f"--config={config}",
    ]  # fmt: skip
    if labels:
        parts.append(f"--labels={labels}")
    return shlex.join(parts)


def render_yaml(job: aiplatform_v1.CustomJob, stack: StackOutputs) -> str:
    """The CustomJobSpec only: gcloud takes the display name, labels and region as flags (and
    the KMS key as --kms-key-name), printed in the header."""
    rest = rest_dict(job)
    header = [
        "# CustomJobSpec for: " + gcloud_command(rest, stack),
    ]
    if "encryptionSpec" in rest:
        header.append(f"# add: --kms-key-name={rest['encryptionSpec']['kmsKeyName']}")
    body = yaml.safe_dump(rest["jobSpec"], sort_keys=False, width=100)
    return "\n".join(header) + "\n" + body


def render_study_json(job: aiplatform_v1.HyperparameterTuningJob) -> str:
    """The whole HyperparameterTuningJob as REST JSON (what the API receives)."""
    return json.dumps(tuning_job_rest(job), indent=2) + "\n"


def gcloud_study_command(
    job: dict[str, Any], stack: StackOutputs, config: str = "study.yaml"
) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(job.get("labels", {}).items()))
    parts = [
        "gcloud", "ai", "hp-tuning-jobs", "create",
        f"--project={stack.project}", f"--region={stack.region}",
        f"--display-name={job['displayName']}", f"--config={config}",
    ]  # fmt: skip
    if labels:
        parts.append(f"--labels={labels}")
    return shlex.join(parts)


STUDY_FLAGS = ("displayName", "labels", "encryptionSpec")
"""Written as `gcloud ai hp-tuning-jobs create` flags, not in its --config file."""


def render_study_yaml(job: aiplatform_v1.HyperparameterTuningJob, stack: StackOutputs) -> str:
    """The HyperparameterTuningJob YAML `gcloud ai hp-tuning-jobs create --config` reads (the
    trial counts, studySpec and trialJobSpec; gcloud's own source parses the file as a whole
    HyperparameterTuningJob); the display name, labels, region and key are its flags."""
    rest = tuning_job_rest(job)
    header = ["# HyperparameterTuningJob config for: " + gcloud_study_command(rest, stack)]
    if "encryptionSpec" in rest:
        header.append(f"# add: --kms-key-name={rest['encryptionSpec']['kmsKeyName']}")
    body = {k: v for k, v in rest.items() if k not in STUDY_FLAGS}
    return "\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False, width=100)
