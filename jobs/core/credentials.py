"""Does this look like a credential? Env names (``HF_TOKEN``) and values (``hf_...``, AWS keys,
PEM blocks, long random tokens) that should have been a Secret Manager name. Read by the
validation rules and by `vtx import`, which turns such env entries into ``secrets:``."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter

# Env name parts that say "this is a credential". Whole underscore-separated parts only, so
# TOKENIZERS_PARALLELISM is fine and HF_TOKEN is not.
CREDENTIAL_PARTS = {
    "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "APIKEY", "CREDENTIALS",
    "CREDENTIAL", "PRIVATE", "AUTH",
}  # fmt: skip
CREDENTIAL_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("SECRET", "KEY"), ("PRIVATE", "KEY")}
# Well-known key formats (prefix + length): Hugging Face, AWS, GitHub, OpenAI/Anthropic,
# Google API keys, Slack, PEM private keys, service account key JSON.
KEY_VALUE_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b(ghp|gho|ghs)_[A-Za-z0-9]{36}\b|\bgithub_pat_\w{40,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r'"private_key"\s*:'),
)


def looks_like_credential_name(name: str) -> bool:
    parts = name.upper().split("_")
    return bool(CREDENTIAL_PARTS & set(parts)) or any(
        pair in CREDENTIAL_PAIRS for pair in itertools.pairwise(parts)
    )


def looks_like_key(value: str) -> bool:
    if any(p.search(value) for p in KEY_VALUE_PATTERNS):
        return True
    # A long random token (API keys without a known prefix). Paths, URIs and hex digests are
    # excluded: they have '/', ':' or no upper case.
    token = value.strip()
    if len(token) < 32 or not re.fullmatch(r"[A-Za-z0-9+=_-]+", token):
        return False
    classes = sum(bool(re.search(c, token)) for c in ("[a-z]", "[A-Z]", "[0-9]"))
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return classes == 3 and entropy >= 4.0
