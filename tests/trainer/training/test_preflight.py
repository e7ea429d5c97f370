"""Before the tokenizer, the data and the model load, a training process checks every location
and size its config names: each mistake exits 2 with one line naming the key, never a traceback
after the model has loaded, a MemoryError, or a minute of gcsfs retries."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.local.plumbing.ports import free_port
from tests.conftest import REPO
from tests.trainer.conftest import DATASET, tiny_config
from trainer.config.env import VertexEnv
from trainer.config.schema import ConfigError, parse_config
from trainer.model import loading
from trainer.training.cli import main
from trainer.training.preflight import host_memory_bytes, preflight

EXAMPLES = REPO / "trainer" / "examples"


def train_error(capsys: pytest.CaptureFixture[str], *overrides: str) -> tuple[int, str]:
    """(exit code, stderr) of `python -m trainer --config tiny.yaml --set ...` (training)."""
    args = ["--config", str(EXAMPLES / "tiny.yaml")]
    for item in overrides:
        args += ["--set", item]
    previous = signal.getsignal(signal.SIGTERM)  # main() installs the stop request
    try:
        code = main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_an_output_dir_that_cannot_be_created_exits_2_naming_the_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = train_error(capsys, "output_dir=/proc/self/evil")
    assert code == 2 and err.count("\n") == 1, err
    assert "output_dir: cannot write in /proc/self/evil/checkpoints (No such file" in err


def test_an_unwritable_aip_directory_is_named_by_its_variable(tmp_path: Path) -> None:
    cfg = parse_config(tiny_config(str(DATASET), str(tmp_path)))
    with pytest.raises(ConfigError, match=r"^AIP_MODEL_DIR: cannot write in /proc/self/evil"):
        preflight(cfg, VertexEnv(model_dir="/proc/self/evil/model/"))


def test_writable_outputs_are_created_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    cfg = parse_config(tiny_config(str(DATASET), str(tmp_path / "out"), report_to=["tensorboard"]))
    preflight(cfg, VertexEnv())
    created = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert created == ["out", "out/checkpoints", "out/logs", "out/model"]


def test_a_data_file_beyond_the_host_memory_exits_2_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(host_memory_bytes())  # sparse: no disk used, and reading it would never end
    code, err = train_error(capsys, f"data.path={big}", f"output_dir={tmp_path / 'out'}")
    assert code == 2 and err.count("\n") == 1, err
    assert f"data.path: {big} holds " in err and "split the data" in err


def test_a_model_config_beyond_the_memory_exits_2_before_torch_allocates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2.4e11 parameters: ~900 GiB of fp32 weights alone. Under the schema's own caps, so only the
    # comparison with this machine's memory stops it.
    code, err = train_error(capsys, "model.config.hidden_size=200000", f"output_dir={tmp_path}")
    assert code == 2 and err.count("\n") == 1, err
    assert "model.config: about 2.4e+11 parameters need " in err
    assert "lower hidden_size, intermediate_size, num_hidden_layers or vocab_size" in err


@pytest.fixture
def unreachable_gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """gcsfs pointed at a closed port of 127.0.0.1, and a short wait for it."""
    import gcsfs

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(loading, "REMOTE_READ_TIMEOUT_S", 0.5)
    gcsfs.GCSFileSystem.clear_instance_cache()  # an instance made for another endpoint
    yield
    gcsfs.GCSFileSystem.clear_instance_cache()  # none for the closed port outlives the test


@pytest.mark.usefixtures("unreachable_gcs")
def test_an_unreachable_gcs_data_path_exits_2_naming_the_key_and_the_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = train_error(capsys, "data.path=gs://b/train.jsonl", f"output_dir={tmp_path}")
    assert code == 2 and err.count("\n") == 1, err
    assert "data.path: cannot reach gs://b/train.jsonl (no answer in 0.5 s)" in err


@pytest.mark.usefixtures("unreachable_gcs")
def test_an_unreachable_gcs_output_dir_is_named_too(tmp_path: Path) -> None:
    cfg = parse_config(tiny_config(str(DATASET), "gs://b/runs/x"))
    with pytest.raises(ConfigError, match=r"^output_dir: cannot reach gs://b/runs/x/checkpoints"):
        preflight(cfg, VertexEnv())


def test_gcs_locations_in_the_emulator_pass_and_a_missing_file_is_named(
    tmp_path: Path, gcs_bucket: str
) -> None:
    import fsspec

    data = f"gs://{gcs_bucket}/data/train.jsonl"
    with fsspec.open(data, "wb") as f:
        f.write(DATASET.read_bytes())
    preflight(parse_config(tiny_config(data, f"gs://{gcs_bucket}/runs/x")), VertexEnv())
    missing = parse_config(tiny_config(f"gs://{gcs_bucket}/data/none.jsonl", str(tmp_path)))
    with pytest.raises(ConfigError, match=rf"^data\.path: gs://{gcs_bucket}/data/none\.jsonl does"):
        preflight(missing, VertexEnv())
    folder = parse_config(tiny_config(f"gs://{gcs_bucket}/data", str(tmp_path)))
    with pytest.raises(ConfigError, match=r"data is a folder; give one JSONL or Parquet file"):
        preflight(folder, VertexEnv())
