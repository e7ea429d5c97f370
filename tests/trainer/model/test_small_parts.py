"""Secrets, the estimate, and the loop's less common paths (padding, early stopping)."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from tests.conftest import HANG_S
from tests.trainer.conftest import TINY_LLAMA, TOKENIZER, read_json_lines, tiny_config
from trainer.config.env import VertexEnv
from trainer.config.schema import ConfigError, parse_config
from trainer.config.secrets import SECRETS_ENV, export_secrets, parse_secret_refs, resource_name
from trainer.data.batches import IGNORE, Example, Row, collate
from trainer.model.attention import use_segment_attention
from trainer.training.estimate import estimate
from trainer.training.loop import loss_sum, train


def test_secret_refs_parse_from_pairs_or_json():
    assert parse_secret_refs("HF_TOKEN=hf-token, WANDB_API_KEY=projects/p/secrets/w") == {
        "HF_TOKEN": "hf-token",
        "WANDB_API_KEY": "projects/p/secrets/w",
    }
    assert parse_secret_refs('{"HF_TOKEN": "hf-token"}') == {"HF_TOKEN": "hf-token"}
    with pytest.raises(ValueError, match="ENV_NAME=SECRET"):
        parse_secret_refs("HF_TOKEN")
    assert resource_name("hf-token", "123") == "projects/123/secrets/hf-token/versions/latest"
    assert (
        resource_name("projects/p/secrets/s/versions/3", None) == "projects/p/secrets/s/versions/3"
    )
    with pytest.raises(ValueError, match="CLOUD_ML_PROJECT_ID"):
        resource_name("hf-token", None)


def test_secrets_are_exported_by_name_and_their_values_never_logged(monkeypatch, caplog, capsys):
    from google.cloud import secretmanager

    requested = []

    class FakeClient:
        def access_secret_version(self, name: str):
            requested.append(name)
            payload = type("Payload", (), {"data": b"s3cr3t-value"})
            return type("Response", (), {"payload": payload})

    monkeypatch.setattr(secretmanager, "SecretManagerServiceClient", FakeClient)
    environ = {SECRETS_ENV: "HF_TOKEN=hf-token", "CLOUD_ML_PROJECT_ID": "123"}
    with caplog.at_level(logging.DEBUG):
        assert export_secrets(environ) == ["HF_TOKEN"]
    assert environ["HF_TOKEN"] == "s3cr3t-value"
    assert SECRETS_ENV not in environ  # workers inherit values, they do not fetch again
    assert requested == ["projects/123/secrets/hf-token/versions/latest"]
    logged = (
        caplog.text + "".join(str(r.__dict__) for r in caplog.records) + capsys.readouterr().out
    )
    assert "s3cr3t-value" not in logged and "HF_TOKEN" in logged


def test_estimate_counts_parameters_and_shards_states_under_fsdp(tmp_path):
    cfg = parse_config(tiny_config("x.jsonl", str(tmp_path)))
    one = estimate(cfg, devices=1)
    # Embedding 1024*32 (tied head) + 2 layers of attention and MLP + norms.
    assert one["parameters"] == one["trainable_parameters"] > 32 * 1024
    assert one["tokens_per_optimizer_step_max"] == 2 * 128
    sharded = estimate(parse_config(tiny_config("x.jsonl", str(tmp_path), fsdp=True)), devices=8)
    assert sharded["weights_grads_optimizer_gib"] == pytest.approx(
        one["weights_grads_optimizer_gib"] / 8
    )
    lora = estimate(
        parse_config(tiny_config("x.jsonl", str(tmp_path), **{"model.lora": {"r": 2}})), devices=1
    )
    assert lora["trainable_parameters"] < one["trainable_parameters"] / 10


def test_estimate_reads_only_the_config_of_a_stored_model(tmp_path, gcs_bucket):
    import fsspec
    from transformers import AutoConfig

    options = dict(TINY_LLAMA)
    config = AutoConfig.for_model(options.pop("model_type"), **options).to_json_string()
    weights = b"not safetensors: loading the weights would fail"
    local = tmp_path / "model"
    local.mkdir()
    (local / "config.json").write_text(config)
    (local / "model.safetensors").write_bytes(weights)
    for name, data in (("config.json", config.encode()), ("model.safetensors", weights)):
        with fsspec.open(f"gs://{gcs_bucket}/model/{name}", "wb") as f:
            f.write(data)
    from_mapping = estimate(parse_config(tiny_config("x.jsonl", str(tmp_path))), devices=1)
    for source in (str(local), f"gs://{gcs_bucket}/model"):
        model = {"name_or_path": source, "tokenizer": str(TOKENIZER)}
        cfg = parse_config(tiny_config("x.jsonl", str(tmp_path), model=model))
        assert estimate(cfg, devices=1)["parameters"] == from_mapping["parameters"], source
    missing = {"name_or_path": f"gs://{gcs_bucket}/nothing", "tokenizer": str(TOKENIZER)}
    with pytest.raises(ConfigError, match=r"nothing/config\.json does not exist"):
        estimate(parse_config(tiny_config("x.jsonl", str(tmp_path), model=missing)), devices=1)


def test_estimate_of_an_unreadable_stored_model_fails_fast_with_what_to_do(tmp_path, monkeypatch):
    from trainer.model import loading as model_module

    def estimate_of(source: str) -> None:
        model = {"name_or_path": source, "tokenizer": str(TOKENIZER)}
        estimate(parse_config(tiny_config("x.jsonl", str(tmp_path), model=model)), devices=1)

    # A store that fails at once: its first line, and the ways out.
    with pytest.raises(ConfigError, match=r"cannot read nope://m/config\.json \(.*nope") as err:
        estimate_of("nope://m")
    assert "application-default login" in str(err.value) and "local copy" in str(err.value)
    # A store that does not answer (without credentials or network gcsfs retries for a minute).
    import fsspec

    released = threading.Event()  # it answers only after the estimate gave up on it

    def no_answer(*args, **kwargs):
        released.wait(HANG_S)
        raise OSError("gave up")

    monkeypatch.setattr(fsspec, "open", no_answer)
    monkeypatch.setattr(model_module, "REMOTE_READ_TIMEOUT_S", 0.2)
    try:
        with pytest.raises(
            ConfigError, match=r"cannot read gs://b/m/config\.json \(no answer in 0\.2 s"
        ):
            estimate_of("gs://b/m")
    finally:
        released.set()


def test_unpacked_length_grouped_batches_train_and_report_padding(tmp_path, small_dataset, capsys):
    cfg = tiny_config(
        str(small_dataset), str(tmp_path), max_steps=3, save_steps=None,
        **{"data.packing": False, "data.group_by_length": True},
    )  # fmt: skip
    assert train(parse_config(cfg), VertexEnv()) == 0
    logs = [e for e in read_json_lines(capsys.readouterr().out) if e.get("message") == "train"]
    # Bucketing leaves little padding even without packing; the figure is reported every step.
    assert len(logs) == 3 and all(0.5 < e["padding_efficiency"] <= 1 for e in logs)


def test_early_stopping_ends_the_run_and_still_exports(tmp_path, small_dataset, capsys):
    cfg = tiny_config(
        str(small_dataset), str(tmp_path), max_steps=20, save_steps=None, eval_steps=1,
        early_stopping_patience=2, early_stopping_threshold=100.0, **{"data.eval_fraction": 0.2},
    )  # fmt: skip
    assert train(parse_config(cfg), VertexEnv()) == 0
    events = read_json_lines(capsys.readouterr().out)
    assert [e["step"] for e in events if e.get("message", "").startswith("early stopping")] == [3]
    assert len([e for e in events if e.get("message") == "eval"]) == 3
    assert (tmp_path / "model" / "model.safetensors").exists()


def test_save_every_minutes_follows_rank_zero_clock(tmp_path, small_dataset, monkeypatch, capsys):
    clock = iter(range(0, 10_000, 61))  # every reading is 61 s after the previous one
    monkeypatch.setattr("trainer.training.loop.time.monotonic", lambda: float(next(clock)))
    cfg = tiny_config(
        str(small_dataset), str(tmp_path), max_steps=3, save_steps=None, save_every_minutes=1.0
    )
    assert train(parse_config(cfg), VertexEnv()) == 0
    events = read_json_lines(capsys.readouterr().out)
    started = [e["step"] for e in events if e.get("message") == "checkpoint started"]
    assert started == [1, 2]  # step 3 is the final, blocking save
    assert all("blocked_s" in e for e in events if e.get("message") == "checkpoint started")


def test_malloc_thresholds_are_set_unless_the_user_tunes_malloc():
    import subprocess
    import sys

    code = "from trainer.training.allocator import retain_freed_memory as r; print(r())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    mine = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert mine.stdout.strip() == "True", mine.stderr  # this machine runs glibc
    env["MALLOC_TRIM_THRESHOLD_"] = "1000000"
    theirs = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert theirs.stdout.strip() == "False", theirs.stderr


def _losses_with_and_without(key: str, tmp_path, data, capsys, **overrides) -> dict:
    """Train the tiny config twice, with `key` False then True: {flag: per-step losses}."""
    losses = {}
    for flag in (False, True):
        cfg = tiny_config(
            str(data), str(tmp_path / str(flag)), save_steps=None, **{key: flag}, **overrides
        )
        assert train(parse_config(cfg), VertexEnv()) == 0
        events = read_json_lines(capsys.readouterr().out)
        losses[flag] = [e["loss"] for e in events if e.get("message") == "train"]
    return losses


@pytest.mark.slow(cost_s=15)  # two in-process runs, one traced by dynamo and AOT autograd
def test_torch_compile_trains_the_same_losses_as_eager(
    tmp_path, small_dataset, capsys, monkeypatch
):
    """The trainer's compiled path runs dynamo's graphs and trains the losses of the eager one.

    What is ours to prove is dynamo's trace of our model (segment attention, the bucket table,
    the chunked loss) and AOT autograd's backward: `aot_eager` runs both and stops before code
    generation. Whether Inductor's generated kernels equal eager is PyTorch's own concern, and
    its C++ build costs a minute of CPU here. The production backend (Inductor, the trainer's
    default) still runs end to end, once, in the GPU bench's dry run: the variant
    "ours: packing, torch.compile" of tests/bench/trainer/test_gpu.py."""
    import torch
    from torch._dynamo.utils import counters

    compile_module = torch.nn.Module.compile

    def aot_eager(self: torch.nn.Module, *args, **kwargs) -> None:
        # A backend chosen by the trainer itself would collide with this one: a TypeError here.
        compile_module(self, *args, backend="aot_eager", **kwargs)

    monkeypatch.setattr(torch.nn.Module, "compile", aot_eager)
    torch._dynamo.reset()
    counters.clear()
    # One decoder layer has every kind of op the others repeat (attention, MLP, norms). That new
    # batch layouts reuse the graphs: the test below, on the bucket layout.
    one_layer = {"max_steps": 4, "model.config.num_hidden_layers": 1}
    losses = _losses_with_and_without("torch_compile", tmp_path, small_dataset, capsys, **one_layer)
    assert counters["stats"]["unique_graphs"] > 0  # the model ran compiled, not eager
    assert len(losses[True]) == 4
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


def _example(length: int) -> Example:
    ids = [1 + i % 1000 for i in range(length)]
    return Example(input_ids=ids, targets=[*ids[1:], IGNORE])


def test_a_compiled_model_keeps_its_graphs_when_the_bucket_layout_changes():
    """torch.compile guards on the Python values among a call's inputs: the layout goes down as
    a tensor, so batches with new bucket counts and widths reuse the graphs compiled before."""
    import torch
    from torch._dynamo.utils import counters
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    options = dict(TINY_LLAMA)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.for_model(options.pop("model_type"), **options)
    )
    use_segment_attention(model)
    torch._dynamo.reset()
    model.compile(backend="eager", dynamic=True)  # dynamo's guards only: no code generation

    def graphs_after(lengths: tuple[int, ...], buckets: int) -> int:
        batch = collate([Row((_example(n),)) for n in lengths], pad_id=0)
        assert len(batch.buckets) == buckets, batch.buckets
        loss_sum(model, batch, chunk_mb=256).backward()
        return counters["stats"]["unique_graphs"]

    counters.clear()
    compiled = graphs_after((7, 70, 150), 3)
    assert compiled > 0
    layouts = [((5, 60), 2), ((6, 50, 110, 200), 4), ((5, 50, 100, 160, 240), 5), ((30, 31), 1)]
    for lengths, buckets in layouts:
        assert graphs_after(lengths, buckets) == compiled, f"recompiled for {lengths}"


def test_gradient_checkpointing_trains_the_same_losses(tmp_path, small_dataset, capsys):
    # Checkpointed blocks re-run their forward in the backward pass, with the batch's bucket
    # layout passed through as a keyword: the recomputation must see the same layout.
    losses = _losses_with_and_without(
        "model.gradient_checkpointing", tmp_path, small_dataset, capsys,
        max_steps=3, **{"model.lora": {"r": 4}},
    )  # fmt: skip
    assert len(losses[True]) == 3
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)
