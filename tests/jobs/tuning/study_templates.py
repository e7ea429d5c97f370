"""The example study's template, as the study tests and the CLI's read it."""

from __future__ import annotations

from jobs.spec.gcloud import load_template
from jobs.spec.template import JobTemplate
from tests.conftest import TEMPLATES
from tests.jobs.custom_jobs.update_snapshots import STUDY_SNAPSHOT

TINY_TUNE = TEMPLATES / "tiny-tune.yaml"


SNAPSHOT = STUDY_SNAPSHOT


def rich_template() -> JobTemplate:
    """Every parameter type, a conditional child, early stopping and the measurement choice."""
    doc = load_template(TINY_TUNE).to_document()
    doc["study"] = {
        "metric": {"id": "eval_loss", "goal": "MINIMIZE"},
        "algorithm": "RANDOM_SEARCH",
        "parameters": [
            {"id": "learning_rate", "type": "DOUBLE", "min": 1e-5, "max": 1e-2, "scale": "log"},
            {"id": "warmup_steps", "type": "INTEGER", "min": 0, "max": 10},
            {
                "id": "lr_scheduler_type",
                "type": "CATEGORICAL",
                "values": ["linear", "cosine"],
                "conditional": [
                    {
                        "parent_values": ["cosine"],
                        "parameter": {"id": "warmup_ratio", "type": "DOUBLE", "min": 0, "max": 0.2},
                    }
                ],
            },
            {
                "id": "model.lora.r",
                "type": "DISCRETE",
                "values": [4, 8, 16],
                "conditional": [
                    {
                        "parent_values": [16],
                        "parameter": {
                            "id": "model.lora.alpha",
                            "type": "INTEGER",
                            "min": 16,
                            "max": 64,
                            "scale": "linear",
                        },
                    }
                ],
            },
        ],
        "max_trials": 8,
        "parallel_trials": 3,
        "max_failed_trials": 2,
        "measurement_selection": "last",
        "early_stopping": {"rule": "median", "use_elapsed_duration": True},
    }
    return JobTemplate.model_validate(doc)
