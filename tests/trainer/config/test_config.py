from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.trainer.conftest import TINY_LLAMA
from trainer.config.loading import load_config
from trainer.config.schema import (
    ROPE_TYPES,
    ConfigError,
    check_model_config,
    parse_config,
)
from trainer.training.cli import main

EXAMPLES = REPO / "trainer" / "examples"


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
    (tmp_path / "mine.jsonl").write_text("")
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
    with pytest.raises(ConfigError, match=r"data\.max_seq_length: 'long' must be a whole number"):
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

    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["--config", str(EXAMPLES / "tiny.yaml"), *args])
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, next((line for line in err.splitlines() if line.startswith("error: ")), err)


# ---- hostile configs: exit 2 naming the key path, never a traceback ----------------------

TINY_TEXT = (EXAMPLES / "tiny.yaml").read_text()
HOSTILE_CONFIGS = {
    # name: (file bytes, what the error line says)
    "non-UTF-8": (
        TINY_TEXT.encode() + b"# caf\xe9\n",
        f"line {TINY_TEXT.count(chr(10)) + 1}: not UTF-8 text: byte 0xe9",
    ),
    "deep nesting": (
        TINY_TEXT.replace("hidden_size: 64", "hidden_size: " + "[" * 5000 + "]" * 5000).encode(),
        "model.config.hidden_size[0]",  # with PyYAML 6.0.3 also [0][0]...; 6.0.4 stops at [0]
    ),
    "a key written twice": (
        TINY_TEXT.replace("max_steps: 60", "max_steps: 60\nmax_steps: 6").encode(),
        "max_steps: key written twice",
    ),
    "20 MB": (TINY_TEXT.encode() + b"#" + b"x" * 20_000_000, "larger than 262,144 bytes"),
    "an integer beyond 64 bits": (
        TINY_TEXT.replace("max_steps: 60", "max_steps: 99999999999999999999999").encode(),
        "max_steps: 99999999999999999999999 is beyond what a 64-bit integer holds",
    ),
}


def trainer_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr) of `python -m trainer ARGS`, which must not print a traceback."""
    import signal

    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize(("content", "says"), HOSTILE_CONFIGS.values(), ids=list(HOSTILE_CONFIGS))
def test_hostile_config_files_exit_2_naming_the_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str
) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(content)
    code, err = trainer_error(["--config", str(path), "--estimate"], capsys)
    assert code == 2 and err.startswith(f"error: {path}: ") and says in err, err[:500]


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("model.config.hidden_size=-8", "model.config.hidden_size: -8 must be a whole number"),
        ("model.config.num_attention_heads=0", "model.config.num_attention_heads: 0 must be"),
        ("model.config.num_hidden_layers=-1", "model.config.num_hidden_layers: -1 must be"),
        ("model.config.vocab_size=0", "model.config.vocab_size: 0 must be"),
        ("model.config.hidden_size=1.5", "model.config.hidden_size: 1.5 must be a whole number"),
        ("model.config.hidden_size=100000000000", "model.config.hidden_size: 100,000,000,000"),
        ("model.config.hidden_size=1000000", "model.config: about 8.0e+12 parameters"),
        ("model.config.vocab_size=99999999999999999999999", "beyond what a 64-bit integer"),
        ("model.config.pad_token_id=18446744073709551615", "pad_token_id: 18446744073709551615"),
        ("model.config.rope_scaling=banana", "model.config.rope_scaling: must be a mapping"),
        ("model.config.rope_scaling={type: banana}", "rope_scaling.rope_type: 'banana' is not"),
        ("model.config.rope_scaling={rope_type: 7}", "rope_scaling.rope_type: 7 is not"),
        ("model.config.rope_scaling={factor: 2}", "model.config.rope_scaling: needs rope_type"),
        ("model.config.rope_scaling={rope_type: linear}", "rope_type linear needs `factor`"),
        ("model.config.rope_scaling={rope_type: linear, factor: x}", "factor: 'x' must be"),
        ("model.config.rope_scaling={rope_type: linear, factor: -3}", "factor: -3 must be"),
        ("model.config.rope_parameters={rope_type: llama3, factor: 8}", "needs `low_freq_factor`"),
        ("model.config.rope_scaling={rope_type: longrope, short_factor: 1, long_factor: [1]}", ""),
        ("data.path=gs://bucket/shards/", "data.path: gs://bucket/shards/ is a folder"),
        ('data.path="a\\0b"', "data.path: 'a\\x00b' holds a NUL character"),
        ("model." + ".".join(["a"] * 40) + "=1", "the key path is more than 32 levels deep"),
        ("model.config.rope_scaling=" + "[" * 5000 + "]" * 5000, "nested more than 32 levels"),
    ],
)
def test_model_size_rope_and_data_mistakes_exit_2_naming_the_key(
    capsys: pytest.CaptureFixture[str], override: str, says: str
) -> None:
    code, err = trainer_error(
        ["--config", str(EXAMPLES / "tiny.yaml"), "--set", override, "--estimate"], capsys
    )
    assert code == 2 and err.startswith("error: ") and says in err, err[:500]


def test_a_folder_as_data_path_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--config", str(EXAMPLES / "tiny.yaml"), "--set", f"data.path={tmp_path}"]
    code, err = trainer_error([*args, "--set", f"output_dir={tmp_path / 'out'}"], capsys)
    assert code == 2 and f"data.path: {tmp_path} is a folder" in err, err[:500]


@pytest.mark.parametrize(
    "rope_type", ["default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"]
)
def test_rope_table_matches_transformers_and_its_minimal_settings_build(rope_type: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    assert set(ROPE_TYPES) == {"default", *ROPE_INIT_FUNCTIONS}
    head_dim = TINY_LLAMA["hidden_size"] // TINY_LLAMA["num_attention_heads"]
    values = {"short_factor": [1.0] * (head_dim // 2), "long_factor": [1.0] * (head_dim // 2)}
    values |= {"factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    rope = {"rope_type": rope_type} | {k: values[k] for k in ROPE_TYPES[rope_type]}
    check_model_config({**TINY_LLAMA, "rope_scaling": rope})
    with torch.device("meta"):
        AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_LLAMA, rope_scaling=rope))


# ---- numbers: finite and in their key's range, refused in one line naming the key ----------


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "learning_rate=1.0e+400",
            "learning_rate: inf must be a finite number > 0 (write e.g. learning_rate=5e-05)",
        ),
        ("learning_rate=.nan", "learning_rate: nan must be a finite number > 0"),
        (
            "max_steps=-1",
            "max_steps: -1 must be a whole number >= 1 or null (write e.g. max_steps=100)",
        ),
        ("max_steps=0", "max_steps: 0 must be a whole number >= 1 or null"),
        ("max_steps=2.5", "max_steps: 2.5 must be a whole number >= 1 or null"),
        ("num_train_epochs=.inf", "num_train_epochs: inf must be a finite number > 0"),
        (
            "adam_beta1=1",
            "adam_beta1: 1 must be a finite number in [0, 1) (write e.g. adam_beta1=0.9)",
        ),
        ("adam_beta2=-0.1", "adam_beta2: -0.1 must be a finite number in [0, 1)"),
        ("adam_epsilon=0", "adam_epsilon: 0 must be a finite number > 0"),
        (
            "warmup_steps=-5",
            "warmup_steps: -5 must be a whole number >= 0 (write e.g. warmup_steps=100)",
        ),
        ("gradient_accumulation_steps=0", "gradient_accumulation_steps: 0 must be a whole number"),
        ("seed=-1", "seed: -1 must be a whole number in [0, 4294967295] (write e.g. seed=42)"),
        ("save_every_minutes=.inf", "save_every_minutes: inf must be a finite number > 0 or null"),
        ("eval_steps=0", "eval_steps: 0 must be a whole number >= 1 or null"),
        ("loss_chunk_mb=-.inf", "loss_chunk_mb: -inf must be a finite number > 0 or null"),
        (
            "model.lora.dropout=1.0",
            "model.lora.dropout: 1.0 must be a finite number in [0.0, "
            "1.0) (write e.g. model.lora.dropout=0.05)",
        ),
        (
            "model.lora.r=0",
            "model.lora.r: 0 must be a whole number >= 1 (write e.g. model.lora.r=8)",
        ),
        ("data.max_seq_length=1", "data.max_seq_length: 1 must be a whole number in [2, 16777216]"),
        (
            "data.eval_fraction=.nan",
            "data.eval_fraction: nan must be a finite number in [0.0, 1.0)",
        ),
        (
            "model.config.rms_norm_eps=.inf",
            "model.config.rms_norm_eps: inf must be a finite number",
        ),
    ],
)
def test_numbers_out_of_range_or_not_finite_are_refused_naming_the_key(
    override: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLES / "tiny-lora.yaml", [override])
    message = str(info.value)
    assert message.startswith(f"{EXAMPLES / 'tiny-lora.yaml'}: {says}") and "\n" not in message


@pytest.mark.parametrize("override", ["max_steps=-1", "max_steps=0", "learning_rate=1.0e+400"])
def test_a_number_out_of_range_exits_2_in_one_line_before_training(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, override: str
) -> None:
    code, err = trainer_error(
        ["--config", str(EXAMPLES / "tiny.yaml"), "--set", f"output_dir={tmp_path}", "--set",
         override],
        capsys,
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and override.split("=")[0] in err, err
    assert not list(tmp_path.iterdir()), "nothing may be written before the config is accepted"


def test_max_steps_left_out_counts_the_steps_from_the_epochs() -> None:
    assert load_config(EXAMPLES / "tiny.yaml", ["max_steps=null"]).max_steps is None


# ---- data paths: regular files only --------------------------------------------------------


def test_a_device_as_data_path_is_refused_without_reading_it() -> None:
    with pytest.raises(ConfigError, match=r"data\.path: /dev/zero is a character device, not a "):
        load_config(EXAMPLES / "tiny.yaml", ["data.path=/dev/zero"])


def test_a_fifo_as_eval_path_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "eval.jsonl"
    os.mkfifo(fifo)  # opening it to read would block until a writer came
    with pytest.raises(ConfigError, match=r"data\.eval_path: .*eval\.jsonl is a FIFO"):
        load_config(EXAMPLES / "tiny.yaml", [f"data.eval_path={fifo}"])


@pytest.mark.timeout(60)  # open() of a FIFO with no writer blocked before the regular-file check
def test_a_fifo_or_a_device_as_the_config_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"config\.yaml: is a FIFO \(named pipe\); --config "):
        load_config(fifo)
    with pytest.raises(ConfigError, match=r"/dev/zero: is a character device"):
        load_config("/dev/zero")


def test_a_missing_data_file_is_refused_when_the_config_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.jsonl"
    with pytest.raises(ConfigError, match=rf"data\.path: {missing} does not exist"):
        load_config(EXAMPLES / "tiny.yaml", [f"data.path={missing}"])
