"""The trainer never shows a secret value: not in errors, logs, tracebacks or any file a run leaves.

Secret Manager is played by a small REST server (`FakeSecretManager`) that the real
google-cloud-secret-manager client reaches through `SECRET_MANAGER_EMULATOR_HOST`. Like the real
service, its errors quote the resource name they were asked for: a value written where a secret's
name belongs comes back in the error message."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import subprocess
import sys
import traceback
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S, REPO
from tests.json_handler import JsonHandler, serving
from tests.trainer.conftest import tiny_config, write_small_dataset
from trainer.config.secrets import (
    EMULATOR_ENV,
    SECRETS_ENV,
    SecretsError,
    _access,
    export_secrets,
    parse_secret_refs,
)

TIMEOUT_S = HANG_S
# One value per session, shaped like a Hugging Face token, found nowhere else.
PLANTED = f"hf_Planted{uuid.uuid4().hex}"
PLANTED_FORMS = (PLANTED, base64.b64encode(PLANTED.encode()).decode())
ACCESS = re.compile(r"^/v1/(projects/[^/]+/secrets/[^/]+/versions/[^/]+):access$")


class FakeSecretManager:
    """`AccessSecretVersion` over REST on 127.0.0.1; `status` forces every answer's HTTP code."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.requested: list[str] = []
        self.status: int | None = None
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                match = ACCESS.match(unquote(urlsplit(self.path).path))
                name = match[1] if match else self.path
                fake.requested.append(name)
                value = fake.values.get(name)
                if fake.status is None and value is not None:
                    data = base64.b64encode(value.encode()).decode()
                    self.answer(200, {"name": name, "payload": {"data": data}})
                    return
                code = fake.status or 404
                status = {403: "PERMISSION_DENIED", 404: "NOT_FOUND"}.get(code, "INTERNAL")
                # What the real service says: the name it was asked for, quoted.
                message = f"Secret Version [{name}] not found or permission denied."
                self.answer(code, {"error": {"code": code, "message": message, "status": status}})

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def secret_manager() -> Iterator[FakeSecretManager]:
    fake = FakeSecretManager()
    fake.values["projects/123/secrets/hf-token/versions/latest"] = PLANTED
    with serving(fake.server):
        yield fake


def shown(exc: BaseException) -> str:
    """Everything Python would print for `exc` if it ended the process."""
    return "".join(traceback.format_exception(exc))


def assert_not_shown(text: str, where: str) -> None:
    for form in PLANTED_FORMS:
        assert form not in text, f"the planted secret ({form}) appears in {where}"


# A value where a name belongs, or entries that are no names at all. Each holds the value.
MALFORMED = {
    "a value alone": PLANTED,
    "a value after a good entry": f"HF_TOKEN=hf-token,{PLANTED}",
    "a colon for '='": f"HF_TOKEN:{PLANTED}",
    "a quoted value, .env style": f'HF_TOKEN="{PLANTED}"',
    "a value with a space": f"HF_TOKEN={PLANTED} x",
    "JSON with an object for a name": json.dumps({"HF_TOKEN": {"value": PLANTED}}),
    "JSON cut short": json.dumps({"HF_TOKEN": PLANTED})[:-1],
    "a JSON list": json.dumps([PLANTED]),
    "a value as the variable's name": json.dumps({f"{PLANTED} ": "hf-token"}),
    "a value inside a resource name": f"HF_TOKEN=projects/p/secrets/x/{PLANTED}",
}


@pytest.mark.parametrize("raw", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_vtx_secrets_is_refused_before_any_request_without_showing_it(
    raw: str, secret_manager: FakeSecretManager
) -> None:
    environ = {SECRETS_ENV: raw, "CLOUD_ML_PROJECT_ID": "123", EMULATOR_ENV: secret_manager.host}
    with pytest.raises(SecretsError) as err:
        export_secrets(environ)
    assert_not_shown(shown(err.value), "the error")
    assert secret_manager.requested == []
    assert environ[SECRETS_ENV] == raw and "HF_TOKEN" not in environ


def test_every_bad_entry_is_named_by_its_variable_or_else_its_position() -> None:
    with pytest.raises(SecretsError) as err:
        parse_secret_refs(f"HF_TOKEN={PLANTED} x, WANDB_API_KEY=wandb, {PLANTED}=not a name")
    message = str(err.value)
    assert message.startswith("HF_TOKEN: not a Secret Manager secret name")
    assert "; VTX_SECRETS entry 3: not a Secret Manager secret name" in message
    assert "WANDB" not in message
    assert_not_shown(message, "the error")
    with pytest.raises(SecretsError, match="VTX_SECRETS entry 2 is not ENV_NAME=SECRET"):
        parse_secret_refs(f"HF_TOKEN=hf-token,{PLANTED}")
    with pytest.raises(SecretsError, match="HF_TOKEN: named twice"):
        parse_secret_refs("HF_TOKEN=a,HF_TOKEN=b")


@pytest.mark.parametrize(
    ("status", "kind"), [(404, "NotFound (404)"), (403, "Forbidden (403)"), (500, "500")]
)
def test_a_value_written_as_the_secret_name_is_not_quoted_back_from_secret_manager(
    status: int, kind: str, secret_manager: FakeSecretManager
) -> None:
    secret_manager.status = status
    environ = {
        SECRETS_ENV: f"HF_TOKEN={PLANTED}",
        "CLOUD_ML_PROJECT_ID": "123",
        EMULATOR_ENV: secret_manager.host,
    }
    with pytest.raises(SecretsError, match="HF_TOKEN: ") as err:
        export_secrets(environ)
    assert kind in str(err.value)
    assert secret_manager.requested == [f"projects/123/secrets/{PLANTED}/versions/latest"]
    assert_not_shown(shown(err.value), "the error")


def test_an_unreachable_secret_manager_is_reported_without_the_url() -> None:
    # requests' connection errors quote the URL, which holds the resource name.
    environ = {
        SECRETS_ENV: f"HF_TOKEN={PLANTED}",
        "CLOUD_ML_PROJECT_ID": "123",
        EMULATOR_ENV: f"127.0.0.1:{free_port()}",
    }
    with pytest.raises(SecretsError, match="HF_TOKEN: ") as err:
        export_secrets(environ)
    assert_not_shown(shown(err.value), "the error")


def test_values_arrive_through_the_real_client_and_only_names_are_logged(
    secret_manager: FakeSecretManager, caplog: pytest.LogCaptureFixture
) -> None:
    pinned = "projects/other/secrets/w/versions/3"
    secret_manager.values[pinned] = "wandb-value"
    environ = {
        SECRETS_ENV: json.dumps({"HF_TOKEN": "hf-token", "WANDB_API_KEY": pinned}),
        "CLOUD_ML_PROJECT_ID": "123",
        EMULATOR_ENV: secret_manager.host,
    }
    with caplog.at_level(logging.DEBUG):
        assert export_secrets(environ) == ["HF_TOKEN", "WANDB_API_KEY"]
    assert environ["HF_TOKEN"] == PLANTED and environ["WANDB_API_KEY"] == "wandb-value"
    assert SECRETS_ENV not in environ
    logged = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert_not_shown(logged, "the logs")
    assert "wandb-value" not in logged and "HF_TOKEN" in logged


def test_a_non_utf8_value_is_refused_without_its_bytes(secret_manager) -> None:
    class Client:
        def access_secret_version(self, name: str) -> object:
            payload = type("Payload", (), {"data": b"\xff" + PLANTED.encode()})
            return type("Response", (), {"payload": payload})

    with pytest.raises(SecretsError, match="not UTF-8") as err:
        _access(Client(), "HF_TOKEN", "projects/123/secrets/hf-token/versions/latest")
    assert_not_shown(shown(err.value), "the error")


# ---- a whole run, as the container runs it ------------------------------------------------


def gcs_objects(bucket: str) -> dict[str, bytes]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="vtx-test", credentials=AnonymousCredentials())
    return {blob.name: blob.download_as_bytes() for blob in client.list_blobs(bucket)}


@pytest.mark.slow(cost_s=25)
def test_no_output_log_or_file_of_a_run_holds_a_planted_secret(
    tmp_path: Path, gcs_bucket: str, secret_manager: FakeSecretManager
) -> None:
    """A run that reads the secret and trains (and one whose workers crash with it in their
    environment), then runs with malformed `VTX_SECRETS` through both entry points: every byte
    they print, and every file and object they leave, is searched for the value."""
    root = tmp_path / "run-root"  # TMPDIR, HOME and caches of the processes: all is searched
    root.mkdir()
    data = write_small_dataset(root)
    cfg = tiny_config(str(data), str(root / "outputs"), max_steps=4, save_steps=2)
    cfg["report_to"] = ["tensorboard"]
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    prefix = f"gs://{gcs_bucket}/runs/secret-drill"
    base_env = {
        **os.environ,
        "TMPDIR": str(root / "tmp"),
        "HOME": str(root / "home"),
        "HF_HOME": str(root / "home" / "hf"),
        "XDG_CACHE_HOME": str(root / "home" / "cache"),
        "CLOUD_ML_HP_METRIC_FILE": str(root / "hypertune" / "output.metrics"),
        "CLOUD_ML_PROJECT_ID": "123",
        "CLOUD_ML_JOB_ID": "42",
        EMULATOR_ENV: secret_manager.host,
        "AIP_CHECKPOINT_DIR": f"{prefix}/checkpoints/",
        "AIP_MODEL_DIR": f"{prefix}/model/",
        "AIP_TENSORBOARD_LOG_DIR": f"{prefix}/logs/",
        "OMP_NUM_THREADS": "1",
        # torchrun's own port, not the default 29500 that another test's run may hold.
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    for key in ("TMPDIR", "HOME"):
        Path(base_env[key]).mkdir()

    def run(module: str, vtx_secrets: str, **env_: str) -> subprocess.CompletedProcess[str]:
        env = {**base_env, SECRETS_ENV: vtx_secrets, **env_}
        return subprocess.run(
            [sys.executable, "-m", module, "--config", str(config)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )

    outputs = {}
    trained = run("trainer.launch", "HF_TOKEN=hf-token")
    outputs["the run"] = trained
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert secret_manager.requested == ["projects/123/secrets/hf-token/versions/latest"]
    # The first checkpoint cannot be written: the worker dies of an exception, with the value in
    # its environment, and torchrun reports the failure.
    crashed = run("trainer.launch", "HF_TOKEN=hf-token", AIP_CHECKPOINT_DIR="gs://nowhere/c/")
    outputs["the crashed run"] = crashed
    assert crashed.returncode not in (0, 2), crashed.stdout[-3000:] + crashed.stderr[-3000:]
    assert "Traceback" in crashed.stdout + crashed.stderr
    for module in ("trainer.launch", "trainer"):
        for case in ("a value alone", "JSON with an object for a name"):
            refused = run(module, MALFORMED[case])
            outputs[f"{module} with {case}"] = refused
            said = refused.stdout + refused.stderr
            assert refused.returncode == 2 and "Traceback" not in said, said
            assert "secret" in said.lower()
        asked = len(secret_manager.requested)
        quoted = run(module, f"HF_TOKEN={PLANTED}")  # Secret Manager quotes the name back
        outputs[f"{module} with a value for a name"] = quoted
        said = quoted.stdout + quoted.stderr
        assert quoted.returncode == 2 and "Traceback" not in said, said
        assert "NotFound" in said
        assert len(secret_manager.requested) == asked + 1

    for what, result in outputs.items():
        assert_not_shown(result.stdout, f"the output of {what}")
        assert_not_shown(result.stderr, f"the errors of {what}")
    files = [path for path in root.rglob("*") if path.is_file()]
    for path in files:
        assert_not_shown(path.read_bytes().decode("latin-1"), str(path))
    objects = gcs_objects(gcs_bucket)
    for name, data_ in objects.items():
        assert_not_shown(data_.decode("latin-1"), f"gs://{gcs_bucket}/{name}")
    # The search covered what a run writes: checkpoints, the model, TensorBoard events.
    names = "\n".join(objects)
    assert "/checkpoints/" in names and "/model/" in names and "/logs/" in names, names
    assert any("tfevents" in path.name for path in files) or "tfevents" in names
