"""The serving entry point on models the trainer exported (full, LoRA adapter, LoRA merged):
Vertex's routes on a real server on 127.0.0.1, health before and after the load, greedy
predictions equal to the model's own generate, a request's instances generated as padded
batches with the same texts as one at a time, and the refusals (400, 413, 503)."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S, REPO
from tests.trainer.conftest import run_in_process, tiny_config, write_small_dataset
from trainer.serving.env import (
    BATCH_TOKENS_ENV,
    MAX_BATCH_ENV,
    BatchLimits,
    ServingEnv,
    ServingEnvError,
)
from trainer.serving.request import MAX_REQUEST_BYTES, GenerationOptions, RequestError
from trainer.serving.served_model import ModelLoadError, ServedModel, find_layout, plan_batches
from trainer.serving.server import ModelSlot, create_app, main

HEALTH = "/v1/endpoints/123/deployedModels/456"
PREDICT = f"{HEALTH}:predict"
PROMPT = "The quick brown fox"
PROMPTS = [
    "Once upon a time, in a land far away, there lived a model that padded on the left",
    "Hi",
    PROMPT,
    "The weather today is",
    "Tell me a story about a dragon and a knight",
]
"""Of five different token lengths: in one batch, every row but the longest is padded."""


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The trainer's own exports, two steps each: a full model, then LoRA on it as the base,
    exported with merge_on_export (merged/) and without (the adapter alone)."""
    root = tmp_path_factory.mktemp("exports")
    data = str(write_small_dataset(root))
    assert run_in_process(tiny_config(data, str(root / "full"), max_steps=2, save_steps=None)) == 0
    lora = {"name_or_path": str(root / "full" / "model"), "lora": {"r": 4, "alpha": 8}}
    merged = tiny_config(
        data,
        str(root / "lora"),
        max_steps=2,
        save_steps=None,
        learning_rate=0.05,  # moves the adapters far enough to change what the model says
        model={**lora, "lora": {**lora["lora"], "merge_on_export": True}},
    )
    assert run_in_process(merged) == 0
    adapter = root / "adapter"
    shutil.copytree(root / "lora" / "model", adapter, ignore=shutil.ignore_patterns("merged"))
    return {
        "full": root / "full" / "model",
        "merged": root / "lora" / "model",
        "adapter": adapter,
    }


def reference_text(path: Path, kind: str, max_new_tokens: int) -> str:
    """What transformers (and peft) generate greedily from the exported files, directly."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if kind == "adapter":
        from peft import PeftModel

        config = json.loads((path / "adapter_config.json").read_text())
        base = AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"])
        with warnings.catch_warnings():  # peft's own deprecation warning, as in ServedModel
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
            model = PeftModel.from_pretrained(base, str(path))
    else:
        model = AutoModelForCausalLM.from_pretrained(
            str(path / "merged" if kind == "merged" else path)
        )
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    inputs = tokenizer(PROMPT, return_tensors="pt")
    with torch.inference_mode():
        out = model.eval().generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        )
    return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


class Server:
    """create_app under uvicorn on 127.0.0.1 (a free port), in a thread of this process."""

    def __init__(self, env: ServingEnv, slot: ModelSlot) -> None:
        import uvicorn

        config = uvicorn.Config(
            create_app(env, slot), host="127.0.0.1", port=env.http_port, log_config=None
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.base = f"http://127.0.0.1:{env.http_port}"

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + HANG_S  # only catches a hang
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def call(self, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=HANG_S) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def serving_env(storage_uri: str, **ours: str) -> ServingEnv:
    return ServingEnv.from_environ(
        {
            "AIP_STORAGE_URI": storage_uri,
            "AIP_HTTP_PORT": str(free_port()),
            "AIP_HEALTH_ROUTE": HEALTH,
            "AIP_PREDICT_ROUTE": PREDICT,
            "AIP_MODE": "PREDICTION",
            **ours,
        }
    )


def record_batches(served: ServedModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of each `model.generate` call from here on."""
    sizes: list[int] = []
    generate = served.model.generate

    def recording(**inputs: Any) -> Any:
        sizes.append(int(inputs["input_ids"].shape[0]))
        return generate(**inputs)

    monkeypatch.setattr(served.model, "generate", recording)
    return sizes


@pytest.fixture(scope="module")
def full_server(exports: dict[str, Path]) -> Iterator[Server]:
    env = serving_env(str(exports["full"]))
    slot = ModelSlot()
    slot.load(lambda: ServedModel.load(env.storage_uri))
    with Server(env, slot) as server:
        yield server


def test_health_is_503_until_the_model_is_loaded_then_200(exports: dict[str, Path]) -> None:
    env = serving_env(str(exports["full"]))
    slot = ModelSlot()
    with Server(env, slot) as server:
        status, body = server.call(HEALTH)
        assert status == 503 and body["error"]["status"] == "UNAVAILABLE"
        status, _ = server.call(PREDICT, {"instances": [PROMPT]})
        assert status == 503
        slot.load(lambda: ServedModel.load(env.storage_uri))
        assert server.call(HEALTH) == (200, {})


@pytest.mark.parametrize("kind", ["full", "merged", "adapter"])
def test_greedy_prediction_equals_the_models_own_generate(
    exports: dict[str, Path], kind: str
) -> None:
    path = exports[kind]
    assert find_layout(str(path)).kind == kind
    env = serving_env(str(path))
    slot = ModelSlot()
    slot.load(lambda: ServedModel.load(env.storage_uri))
    with Server(env, slot) as server:
        body = {"instances": [{"prompt": PROMPT}, PROMPT], "parameters": {"max_new_tokens": 12}}
        status, answer = server.call(PREDICT, body)
    expected = reference_text(path, kind, 12)
    assert status == 200
    assert answer == {"predictions": [{"generated_text": expected}] * 2}
    assert expected  # the tiny model says something: an empty string would prove little


@pytest.mark.parametrize("kind", ["full", "adapter"])
def test_a_padded_batch_gives_the_one_by_one_greedy_texts(
    exports: dict[str, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left padding, its attention mask and the position ids transformers derives from it
    change no greedy token in fp32 (LoRA included: peft passes them through)."""
    served = ServedModel.load(str(exports[kind]))
    lengths = [len(served.tokenizer(p)["input_ids"]) for p in PROMPTS]
    assert len(set(lengths)) == len(PROMPTS), lengths
    options = GenerationOptions(max_new_tokens=12)
    one_by_one = [served.generate(p, options) for p in PROMPTS]
    sizes = record_batches(served, monkeypatch)
    assert served.generate_all(PROMPTS, options) == one_by_one
    assert sizes == [len(PROMPTS)]
    assert len(set(one_by_one)) > 1  # the prompts matter: equal texts would prove little


def test_a_request_over_the_batch_cap_is_split_and_answered_in_order(
    exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = serving_env(str(exports["full"]), **{MAX_BATCH_ENV: "2"})
    slot = ModelSlot()
    slot.load(lambda: ServedModel.load(env.storage_uri, limits=env.batch))
    assert slot.model is not None
    options = GenerationOptions(max_new_tokens=8)
    one_by_one = [slot.model.generate(p, options) for p in PROMPTS]
    sizes = record_batches(slot.model, monkeypatch)
    body = {"instances": PROMPTS, "parameters": {"max_new_tokens": 8}}
    with Server(env, slot) as server:
        status, answer = server.call(PREDICT, body)
    assert status == 200
    assert answer == {"predictions": [{"generated_text": text} for text in one_by_one]}
    assert sizes == [2, 2, 1]


def test_batches_hold_at_most_the_cap_and_the_token_budget() -> None:
    # By length: indices 1, 3, 2 (3 x (3 + 10) = 39 positions), then the cap of 3 starts a batch.
    assert plan_batches([5, 1, 3, 2, 4], 10, BatchLimits(3, 100)) == [[1, 3, 2], [4, 0]]
    # 2 x (40 + 10) = 100 fits the budget; the third, over it on its own, goes alone.
    assert plan_batches([200, 30, 40], 10, BatchLimits(8, 100)) == [[1, 2], [0]]
    assert plan_batches([7], 10, BatchLimits(1, 1)) == [[0]]


def test_an_instance_too_long_is_refused_before_any_is_generated(
    exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    served = ServedModel.load(str(exports["full"]))
    sizes = record_batches(served, monkeypatch)
    too_long = " ".join(["word"] * 600)
    with pytest.raises(RequestError, match=r"instances\[1\]: \d+ prompt tokens .* positions"):
        served.generate_all([PROMPT, too_long], GenerationOptions(max_new_tokens=8))
    assert sizes == []


def test_the_adapter_is_applied(exports: dict[str, Path]) -> None:
    """The adapter changes the base's logits (else the adapter test above proves nothing)."""
    import torch

    adapter = ServedModel.load(str(exports["adapter"]))
    base = ServedModel.load(str(exports["full"]))
    inputs = base.tokenizer(PROMPT, return_tensors="pt")
    with torch.inference_mode():
        assert not torch.allclose(adapter.model(**inputs).logits, base.model(**inputs).logits)


def test_sampling_takes_temperature_and_top_p(full_server: Server) -> None:
    body = {
        "instances": [PROMPT],
        "parameters": {"max_new_tokens": 5, "temperature": 0.7, "top_p": 0.9},
    }
    status, answer = full_server.call(PREDICT, body)
    assert status == 200 and isinstance(answer["predictions"][0]["generated_text"], str)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"instances": [PROMPT], "parameters": {"max_new_tokens": 0}}, "parameters.max_new_tokens"),
        ({"instances": [PROMPT], "parameters": {"max_new_tokens": True}}, "max_new_tokens"),
        ({"instances": [PROMPT], "parameters": {"temperature": -1}}, "parameters.temperature"),
        ({"instances": [PROMPT], "parameters": {"temperature": "hot"}}, "temperature"),
        ({"instances": [PROMPT], "parameters": {"top_p": 0}}, "parameters.top_p"),
        ({"instances": [PROMPT], "parameters": {"top_p": 1.5}}, "parameters.top_p"),
        ({"instances": [PROMPT], "parameters": {"top_k": 5}}, "top_k"),
        ({"instances": [PROMPT], "parameters": [1]}, "parameters"),
        ({"instances": []}, "instances"),
        ({"instances": "hello"}, "instances"),
        ({}, "instances"),
        ({"instances": [PROMPT, 7]}, "instances[1]"),
        ({"instances": [{"text": PROMPT}]}, "instances[0]: unknown field(s) text"),
        ({"instances": [{"prompt": ""}]}, "instances[0].prompt"),
        ({"instances": [PROMPT], "extra": 1}, "extra"),
        ({"instances": [PROMPT], "parameters": {"max_new_tokens": 4000}}, "positions"),
    ],
)
def test_bad_requests_are_400_naming_the_field(
    full_server: Server, body: dict[str, Any], named: str
) -> None:
    status, answer = full_server.call(PREDICT, body)
    assert status == 400
    assert answer["error"]["status"] == "INVALID_ARGUMENT"
    assert named in answer["error"]["message"]


def test_a_body_that_is_not_json_is_400(full_server: Server) -> None:
    status, answer = full_server.call(PREDICT, raw=b"{not json")
    assert status == 400 and "not JSON" in answer["error"]["message"]


def raw_post(port: int, headers: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """A POST written by hand: the server may answer before the body is sent (413)."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_S) as sock:
        sock.sendall(f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body)
        response = b""
        while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    head, _, payload = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def test_a_request_over_vertexs_size_limit_is_413(full_server: Server) -> None:
    port = int(full_server.base.rsplit(":", 1)[1])
    # Declared too big: refused from the headers, before any byte of the body is read.
    declared = f"Content-Type: application/json\r\nContent-Length: {MAX_REQUEST_BYTES + 1}\r\n"
    status, answer = raw_post(port, declared, b"")
    assert status == 413 and str(MAX_REQUEST_BYTES) in answer["error"]["message"]
    # Not declared (chunked): refused once the bytes read pass the limit.
    body = json.dumps({"instances": ["x" * MAX_REQUEST_BYTES]}).encode()
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    status, answer = raw_post(port, "Transfer-Encoding: chunked\r\n", chunked)
    assert status == 413
    # Just under the limit is read and judged on its content (here: too many tokens).
    under = json.dumps({"instances": ["x" * (MAX_REQUEST_BYTES - 100)]}).encode()
    assert len(under) <= MAX_REQUEST_BYTES
    status, _ = full_server.call(PREDICT, raw=under)
    assert status == 400


def test_a_model_from_gcs_is_served(exports: dict[str, Path], gcs_bucket: str) -> None:
    import gcsfs

    fs = gcsfs.GCSFileSystem(token="anon")
    fs.put(str(exports["merged"]), f"{gcs_bucket}/runs/r1/model", recursive=True)
    uri = f"gs://{gcs_bucket}/runs/r1/model"
    assert find_layout(uri).kind == "merged"
    served = ServedModel.load(uri)
    options = GenerationOptions(max_new_tokens=8)
    assert served.generate(PROMPT, options) == reference_text(exports["merged"], "merged", 8)


def test_a_folder_without_a_model_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="artifactUri at the run's model/ prefix"):
        find_layout(str(tmp_path))


def test_an_adapter_whose_base_is_not_here_names_vtx_base_model(
    exports: dict[str, Path], tmp_path: Path
) -> None:
    moved = tmp_path / "adapter"
    shutil.copytree(exports["adapter"], moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "/nowhere/base"
    (moved / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="VTX_BASE_MODEL"):
        ServedModel.load(str(moved))
    served = ServedModel.load(str(moved), base_model=str(exports["full"]))
    assert served.layout.kind == "adapter"


def test_serving_env_defaults_and_refusals() -> None:
    env = ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://b/m"})
    assert (env.http_port, env.health_route, env.predict_route) == (8080, "/health", "/predict")
    with pytest.raises(ServingEnvError, match="AIP_STORAGE_URI"):
        ServingEnv.from_environ({})
    with pytest.raises(ServingEnvError, match="AIP_HTTP_PORT"):
        ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://b/m", "AIP_HTTP_PORT": "http"})
    with pytest.raises(ServingEnvError, match="AIP_PREDICT_ROUTE"):
        ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://b/m", "AIP_PREDICT_ROUTE": "predict"})


def test_batch_limits_default_and_are_read_from_the_environment() -> None:
    assert ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://b/m"}).batch == BatchLimits()
    environ = {"AIP_STORAGE_URI": "gs://b/m", MAX_BATCH_ENV: "4", BATCH_TOKENS_ENV: " 2048 "}
    assert ServingEnv.from_environ(environ).batch == BatchLimits(4, 2048)


@pytest.mark.parametrize("name", [MAX_BATCH_ENV, BATCH_TOKENS_ENV])
@pytest.mark.parametrize("value", ["0", "-4", "eight", "2.5"])
def test_a_batch_limit_that_is_not_a_positive_integer_is_refused(name: str, value: str) -> None:
    with pytest.raises(ServingEnvError, match=f"^{name}: '{value}' is not a positive integer"):
        ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://b/m", name: value})


def test_main_with_a_bad_batch_limit_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    environ = {"AIP_STORAGE_URI": "gs://b/m", "AIP_HTTP_PORT": str(free_port())}
    assert main({**environ, MAX_BATCH_ENV: "0"}) == 2
    logged = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert logged["message"].startswith(f"{MAX_BATCH_ENV}: '0' is not a positive integer")


def test_main_without_a_storage_uri_exits_2_before_listening() -> None:
    assert main({"AIP_HTTP_PORT": str(free_port())}) == 2


def test_the_serving_image_installs_what_trainer_serve_imports() -> None:
    """serve.Dockerfile's requirement list (its inline script, run here on pyproject.toml)
    holds the web server and the model libraries, and it starts `python -m trainer.serve`."""
    import re
    import subprocess
    import sys

    repo = REPO
    dockerfile = (repo / "trainer" / "serve.Dockerfile").read_text()
    script = dockerfile.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    listed = subprocess.run(
        [sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    names = {re.split(r"[<>=!~\[ ]", r)[0].lower() for r in listed}
    assert {"fastapi", "uvicorn", "torch", "transformers", "peft", "gcsfs", "fsspec"} <= names
    assert 'ENTRYPOINT ["python", "-m", "trainer.serve"]' in dockerfile


def test_a_failed_load_is_flagged_and_health_stays_503(tmp_path: Path) -> None:
    """main() ends the process on this flag (exit 1) rather than failing health checks forever."""
    env = serving_env(str(tmp_path))
    slot = ModelSlot()
    slot.load(lambda: ServedModel.load(env.storage_uri))
    assert slot.failed.is_set() and slot.model is None
    with Server(env, slot) as server:
        assert server.call(HEALTH)[0] == 503
