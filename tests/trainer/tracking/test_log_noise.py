"""Library noise kept out of a job's logs, at its source: each test planted the line it removes."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings

import pytest

from tests.conftest import HANG_S, REPO
from tests.trainer.conftest import TINY_LLAMA, TOKENIZER
from trainer.config.schema import ModelConfig
from trainer.model.loading import build_model
from trainer.tracking.metrics import setup_logging


def test_fsspec_info_lines_stay_out_and_the_trainers_own_stay_in(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(rank=0)

    logging.getLogger("fsspec.caching").info("AdaptiveReadaheadCache enabled (blocksize=5242880)")
    logging.getLogger("gcsfs.credentials").info("GCSFS using anonymous credentials")
    logging.getLogger("fsspec").warning("a real problem")
    logging.getLogger("trainer.training.loop").info("train")

    out = capsys.readouterr().out
    assert "AdaptiveReadaheadCache" not in out and "anonymous" not in out
    assert "a real problem" in out and '"message": "train"' in out


def test_a_lora_model_with_gradient_checkpointing_builds_without_future_warnings() -> None:
    cfg = ModelConfig.model_validate(
        {
            "config": dict(TINY_LLAMA),
            "tokenizer": str(TOKENIZER),
            "gradient_checkpointing": True,
            "lora": {"r": 2},
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_model(cfg, seed=0)

    assert not [w for w in caught if issubclass(w.category, FutureWarning)], [
        str(w.message) for w in caught
    ]


def test_the_secret_manager_client_loads_without_googles_python_version_warning() -> None:
    probe = (
        "from trainer.config import secrets\n"
        "secrets._client({'SECRET_MANAGER_EMULATOR_HOST': '127.0.0.1:1'})\n"
        "print('client built')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )

    assert proc.stdout.strip() == "client built", proc.stderr
    assert "FutureWarning" not in proc.stderr, proc.stderr
