"""trainer.model.loading: a pretrained model's load says where its weights came from."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.trainer.conftest import save_tiny_model
from trainer.config.schema import ModelConfig
from trainer.model.loading import build_model


def test_a_pretrained_model_logs_the_name_or_path_it_was_loaded_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = str(save_tiny_model(tmp_path / "tiny-llama"))
    with caplog.at_level(logging.INFO, logger="trainer.model.loading"):
        build_model(ModelConfig(name_or_path=source), seed=0)
    (loaded,) = [r for r in caplog.records if r.getMessage() == "model loaded"]
    assert loaded.__dict__["name_or_path"] == source
