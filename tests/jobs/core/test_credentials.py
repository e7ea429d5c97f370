"""What looks like a credential (`jobs.core.credentials`): every well-known shape is named, the
strings a job ordinarily holds are not, and what a message quotes is redacted."""

from __future__ import annotations

import pytest

from jobs.core.credentials import redact, secret_shape
from jobs.core.problems import Problem
from jobs.core.safe_yaml import short_repr

HEX40 = "0a1b2c3d4e" * 4
"""A W&B API key, or a git commit id: the same 40 lower case hex digits."""

KEYS = {
    "W&B API key": HEX40,
    "W&B API key ": f"local-{HEX40}",  # a W&B server key
    "Hugging Face token": "hf_" + "a1B2c3D4" * 5,
    "Hugging Face token ": "Bearer hf_" + "x" * 34,
    "Google API key": "AIza" + "Sy0-_aB1" * 4 + "xyz",
    "PEM private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n",
    "PEM private key ": "-----BEGIN PRIVATE KEY-----",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "AWS access key id ": "ASIAY34FZKBOKMUTVV7A",
    "GitHub token": "ghp_" + "a1B2c3" * 6,
    "GitHub token ": "gho_" + "a1B2c3" * 6,
    "GitHub token  ": "ghs_" + "a1B2c3" * 6,
    "GitHub token   ": "github_pat_11ABCDEFG0" + "a1B2c3" * 10,
    "sk- and a random token": "sk-" + "a1B2c3D4e5" * 4,
    "sk- and a random token ": "sk-proj-" + "a1B2c3D4e5" * 8,
    "Slack token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
    "Slack token ": "xoxp-1234-5678-abcdef",
    "service account key": '{"type": "service_account", "private_key": "x"}',
    "long random token": "Zk3vQ9xT2mLp8WcR7yHb4NdF6gJs1KaE",
}


@pytest.mark.parametrize(("shape", "value"), list(KEYS.items()), ids=list(KEYS))
def test_every_well_known_key_shape_is_named(shape: str, value: str) -> None:
    found = secret_shape(value)
    assert found is not None and shape.strip() in found
    assert value not in found


@pytest.mark.parametrize(
    "value",
    [
        f"hf_token=hf_{'a1B2c3D4' * 5}",  # after '='
        f"MY_hf_{'a1B2c3D4' * 5}",  # after '_', where \b sees no boundary
        f"--wandb-key={HEX40}",
        f"https://api.wandb.ai?key={HEX40}",
    ],
)
def test_a_key_inside_a_longer_string_is_found(value: str) -> None:
    assert secret_shape(value) is not None


@pytest.mark.parametrize(
    ("value", "context"),
    [
        # image digests and tags
        ("us-docker.pkg.dev/p/r/trainer@sha256:" + "0123456789abcdef" * 4, "image"),
        ("us-docker.pkg.dev/p/r/trainer@sha256:" + "0123456789abcdef" * 4, ""),
        (f"us-docker.pkg.dev/p/r/trainer:{HEX40}", "imageUri"),
        # commit ids where a commit is named
        (HEX40, "GIT_COMMIT"),
        (HEX40, "git-sha"),
        (HEX40, "args --revision"),
        (f"--revision={HEX40}", "args"),
        (f"model.revision={HEX40}", "args"),
        (f"git+https://github.com/org/repo@{HEX40}", "args"),
        (f"https://github.com/org/repo/commit/{HEX40}", ""),
        (HEX40[:12], ""),  # a short commit id
        ("0123456789abcdef" * 4, ""),  # 64 hex digits: a digest, not a W&B key
        # paths, URIs, model ids, names
        ("gs://vtx-local-data/examples/tiny.jsonl", "args"),
        ("gs://acme-ckpt/runs/smoke-cpu-20260101-120000-ab12/", ""),
        ("/gcs/acme-data/train/shard-00000-of-01024.parquet", ""),
        ("meta-llama/Llama-3.1-8B-Instruct", "model.name_or_path"),
        ("Qwen/Qwen2.5-0.5B-Instruct", ""),
        ("projects/vtx-dev-123/secrets/hf-token/versions/latest", ""),
        ("trainer-sa@vtx-dev-123.iam.gserviceaccount.com", ""),
        ("smoke-cpu-20260101-120000-ab12", "vtx-run-id"),
        ("gs://bucket/sk-learn-examples-and-notebooks/x", ""),
        ("TOKENIZERS_PARALLELISM_IS_FALSE_FOR_THIS_JOB", ""),
        ("hf_transfer", ""),
        ("model.lora.target_modules=[q_proj,k_proj,v_proj,o_proj]", ""),
    ],
)
def test_what_a_job_ordinarily_holds_is_not_a_key(value: str, context: str) -> None:
    assert secret_shape(value, context) is None


def test_forty_hex_digits_are_a_w_and_b_key_unless_a_commit_is_named() -> None:
    assert secret_shape(HEX40, "MY_SETTING") is not None
    assert secret_shape(HEX40, "labels team") is not None
    assert secret_shape(HEX40, "args --key") is not None
    assert secret_shape(HEX40, "GIT_COMMIT") is None


def test_redact_replaces_every_key_with_its_shape() -> None:
    text = f"got 'hf_{'a1B2c3D4' * 5}' and {HEX40} and AKIAIOSFODNN7EXAMPLE, not gs://b/x"
    shown = redact(text)
    assert "a1B2c3D4" not in shown and HEX40 not in shown and "AKIAIOSFODNN7EXAMPLE" not in shown
    assert "<a Hugging Face token" in shown and "<a W&B API key" in shown
    assert shown.endswith("not gs://b/x")
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    assert "MIIEvQ" not in redact(f"x {pem} y")


def test_a_problem_never_quotes_a_key_in_its_path_message_or_hint() -> None:
    token = "hf_" + "a1B2c3D4" * 5
    problem = Problem(f"labels.{token}", f"invalid value {token!r}", f"e.g. {token.lower()}")
    assert token not in str(problem) and token.lower() not in str(problem)
    assert "Hugging Face token" in problem.message


def test_a_quoted_key_is_judged_whole_before_it_is_cut() -> None:
    token = "hf_" + "a1B2c3D4" * 10  # longer than a quote: cut, its head alone is short
    assert "a1B2c3D4" not in short_repr(token)
    assert short_repr("spot-ish") == "'spot-ish'"
