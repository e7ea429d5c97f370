from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainer.config import ConfigError, load_config, parse_config

EXAMPLES = Path(__file__).resolve().parents[2] / "trainer" / "examples"


def test_examples_load_and_resolve_relative_paths_against_the_config_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(EXAMPLES / "tiny.yaml")
    assert cfg.data.path == str(EXAMPLES / "data" / "tiny.jsonl")
    assert cfg.model.tokenizer == str(EXAMPLES / "tokenizer")
    lora = load_config(EXAMPLES / "tiny-lora.yaml")
    assert lora.model.lora is not None and lora.model.lora.r == 16


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_config_is_valid(path: Path) -> None:
    load_config(path)


def test_the_l4_example_reads_gcs_and_saves_every_few_minutes() -> None:
    cfg = load_config(EXAMPLES / "l4-lora.yaml")
    assert cfg.model.name_or_path.startswith("gs://") and cfg.data.path.startswith("gs://")
    assert cfg.bf16 and cfg.model.lora is not None and cfg.save_every_minutes


def test_set_overrides_parse_yaml_values_and_keep_urls(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(
        EXAMPLES / "tiny.yaml",
        ["data.path=gs://vtx-local-data/examples/tiny.jsonl", "max_steps=7", "data.packing=false"],
    )
    assert cfg.data.path == "gs://vtx-local-data/examples/tiny.jsonl"
    assert cfg.max_steps == 7 and cfg.data.packing is False
    relative = load_config(EXAMPLES / "tiny.yaml", ["data.path=mine.jsonl"])
    assert relative.data.path == str(tmp_path / "mine.jsonl")


def test_unknown_key_names_its_path_and_suggests_the_known_one(tmp_path):
    path = tmp_path / "bad.yaml"
    raw = yaml.safe_load((EXAMPLES / "tiny-lora.yaml").read_text())
    raw["warmup_step"] = 3
    raw["model"]["lora"]["rank"] = 4
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "warmup_step: unknown key; did you mean `warmup_steps`?" in message
    assert "model.lora.rank: unknown key" in message and "r," in message


def test_wrong_type_names_the_key_path():
    with pytest.raises(ConfigError, match=r"data\.max_seq_length: Input should be a valid integer"):
        parse_config(
            {"model": {"name_or_path": "/m"}, "data": {"path": "x", "max_seq_length": "long"}}
        )


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"model": {}, "data": {"path": "x"}}, "exactly one of `name_or_path`"),
        (
            {"model": {"config": {"hidden_size": 8}, "tokenizer": "t"}, "data": {"path": "x"}},
            "model_type",
        ),
        (
            {"model": {"name_or_path": "/m"}, "data": {"path": "x", "group_by_length": True}},
            "not both",
        ),
        (
            {"model": {"name_or_path": "/m"}, "data": {"path": "x"}, "fp16": True},
            "use `bf16: true`",
        ),
        (
            {"model": {"name_or_path": "/m"}, "data": {"path": "x"}, "eval_steps": 5},
            "eval_fraction",
        ),
    ],
)
def test_inconsistent_settings_are_refused_with_what_to_write(raw, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(raw)


def test_malformed_override_says_what_to_write():
    with pytest.raises(ConfigError, match=r"expected KEY\.PATH=VALUE"):
        load_config(EXAMPLES / "tiny.yaml", ["max_steps"])


def test_override_value_that_is_not_yaml_says_what_to_write():
    with pytest.raises(ConfigError, match=r"learning_rate=\[1': the value is not valid YAML"):
        load_config(EXAMPLES / "tiny.yaml", ["learning_rate=[1"])


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("model.config.model_type=lama", "model.config.model_type: 'lama' is not a transformers"),
        ("model.config.num_attention_heads=3", "model.config: transformers refuses it"),
        ("model.lora.target_modules=[nope]", "model.lora.target_modules: Target modules"),
    ],
)
def test_model_mistakes_found_by_transformers_or_peft_name_the_key(capsys, override, needle):
    code, line = cli_error(["--set", override, "--estimate"], capsys)
    assert code == 2 and line.startswith(f"error: {EXAMPLES / 'tiny.yaml'}: {needle}"), line


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("data.path=/nonexistent/train.jsonl", "data.path: /nonexistent/train.jsonl does not"),
        ("model.tokenizer=/nonexistent/tok", "model.tokenizer: /nonexistent/tok is not a dir"),
        ("per_device_train_batch_size=100000", "per_device_train_batch_size: 38 rows cannot"),
    ],
)
def test_data_and_file_mistakes_found_at_start_up_name_the_key(capsys, tmp_path, override, needle):
    code, line = cli_error(["--set", override, "--set", f"output_dir={tmp_path}"], capsys)
    assert code == 2 and line.startswith(f"error: {EXAMPLES / 'tiny.yaml'}: {needle}"), line


def cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, the stderr line naming the problem) of `python -m trainer` on tiny.yaml."""
    import signal

    from trainer.cli import main

    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["--config", str(EXAMPLES / "tiny.yaml"), *args])
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, next((line for line in err.splitlines() if line.startswith("error: ")), err)
