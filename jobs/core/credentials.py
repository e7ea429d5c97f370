"""Does this look like a credential? Env names (``HF_TOKEN``) and values (``hf_...``, AWS keys,
PEM blocks, W&B keys, long random tokens) that should have been a Secret Manager name. Read by the
validation rules, by `vtx import`, which turns such env entries into ``secrets:``, and by every
`Problem`, which never quotes one (`redact`). A match is described by its shape (`secret_shape`),
never shown."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

# Env name parts that say "this is a credential". Whole underscore-separated parts only, so
# TOKENIZERS_PARALLELISM is fine and HF_TOKEN is not.
CREDENTIAL_PARTS = {
    "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "APIKEY", "CREDENTIALS",
    "CREDENTIAL", "PRIVATE", "AUTH",
}  # fmt: skip
CREDENTIAL_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("SECRET", "KEY"), ("PRIVATE", "KEY")}


@dataclass(frozen=True)
class Shape:
    """A well-known key format: what it is called in a message, and where such a key belongs."""

    name: str
    pattern: re.Pattern[str]
    env: str
    """The variable such a key is usually read from (the ``secrets:`` entry a hint suggests)."""


# Prefixed shapes start where no letter or digit precedes them: `_` does not count, so
# `MY_hf_...` is caught where `\b` would not see a boundary.
_START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"
WANDB_KEY = Shape(
    "a W&B API key (40 lower case hex digits)",
    re.compile(rf"{_START}[0-9a-f]{{40}}{_END}"),
    "WANDB_API_KEY",
)
SHAPES = (
    Shape(
        "a Hugging Face token (hf_ and 30 or more letters and digits)",
        re.compile(rf"{_START}hf_[A-Za-z0-9]{{30,}}"),
        "HF_TOKEN",
    ),
    Shape(
        "an AWS access key id (AKIA or ASIA and 16 capitals and digits)",
        re.compile(rf"{_START}(AKIA|ASIA)[0-9A-Z]{{16}}{_END}"),
        "AWS_ACCESS_KEY_ID",
    ),
    Shape(
        "a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_ or github_pat_)",
        re.compile(rf"{_START}(gh[pousr]_[A-Za-z0-9]{{36}}{_END}|github_pat_\w{{22,}})"),
        "GITHUB_TOKEN",
    ),
    # OpenAI and Anthropic keys (sk-, sk-proj-, sk-ant-...) are random, so mixed case with
    # digits: `sk-learn-examples-and-notebooks` in a path is a name, not a key.
    Shape(
        "an API key (sk- and a random token)",
        re.compile(rf"{_START}sk-(?=[\w-]*[0-9])(?=[\w-]*[A-Z])(?=[\w-]*[a-z])[\w-]{{20,}}"),
        "OPENAI_API_KEY",
    ),
    Shape(
        "a Google API key (AIza and 35 characters)",
        re.compile(rf"{_START}AIza[0-9A-Za-z_-]{{35}}{_END}"),
        "GOOGLE_API_KEY",
    ),
    Shape(
        "a Slack token (xoxb-, xoxp-, ...)",
        re.compile(rf"{_START}xox[abposr]-[A-Za-z0-9-]{{10,}}"),
        "SLACK_TOKEN",
    ),
    Shape(
        "a PEM private key (-----BEGIN ... PRIVATE KEY-----)",
        # The whole block where it ends, so that `redact` takes the key with its header.
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----([\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)?"
        ),
        "PRIVATE_KEY",
    ),
    Shape(
        'a service account key (JSON with "private_key")',
        re.compile(r'"private_key"\s*:'),
        "GOOGLE_APPLICATION_CREDENTIALS",
    ),
)
RANDOM_TOKEN = Shape(
    "a long random token (32 or more mixed-case letters and digits)",
    re.compile(r"[A-Za-z0-9+=_-]{32,}"),
    "API_KEY",
)

# A W&B API key is 40 lower case hex digits, exactly the shape of a git commit id (and of a
# SHA-1 checksum), which templates do carry: `--revision=<sha>`, `GIT_COMMIT`, a `git-sha`
# label, an image tagged with its commit. The two cannot be told apart by their characters,
# so the words around the value decide: where a commit is named (the env variable, label key or
# field, the flag before it, or the text before it in the same string), 40 hex digits are a
# commit; anywhere else they are taken for a W&B key and refused, with a hint that says how to
# name a commit. Image digests (sha256: and 64 hex digits) never match: the 40 digits must stand
# alone.
COMMIT_WORDS = {"commit", "sha", "sha1", "revision", "rev", "git", "ref", "hash", "image", "tag"}
COMMIT_HINT = (
    "if it is a git commit id, name it as one (GIT_COMMIT, a --revision= flag, a label key "
    "git-sha) or write its first 12 characters"
)


def looks_like_credential_name(name: str) -> bool:
    parts = name.upper().split("_")
    return bool(CREDENTIAL_PARTS & set(parts)) or any(
        pair in CREDENTIAL_PAIRS for pair in itertools.pairwise(parts)
    )


def _words(text: str) -> set[str]:
    """Lower-case words of names and flags: ``imageUri`` -> image, uri; ``--git-sha=`` -> git,
    sha."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def _names_commit(text: str) -> bool:
    return bool(COMMIT_WORDS & _words(text))


def _random_token(token: str) -> bool:
    """A long random token (API keys without a known prefix). Paths, URIs and hex digests are
    excluded: they have '/', ':' or no upper case."""
    if len(token) < 32 or not RANDOM_TOKEN.pattern.fullmatch(token):
        return False
    classes = sum(bool(re.search(c, token)) for c in ("[a-z]", "[A-Z]", "[0-9]"))
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return classes == 3 and entropy >= 4.0


def shape_of(value: str, context: str = "") -> Shape | None:
    """The credential format ``value`` has, or None. ``context`` is what names the value (its
    env variable, label key, field, or the flag before it): it decides whether 40 hex digits
    are a commit id or a W&B key."""
    for shape in SHAPES:
        if shape.pattern.search(value):
            return shape
    for match in WANDB_KEY.pattern.finditer(value):
        if not _names_commit(f"{context} {value[: match.start()]}"):
            return WANDB_KEY
    return RANDOM_TOKEN if _random_token(value.strip()) else None


def secret_shape(value: str, context: str = "") -> str | None:
    """What ``value`` looks like, for a message (never the value itself), or None."""
    shape = shape_of(value, context)
    return shape.name if shape else None


def looks_like_key(value: str, context: str = "") -> bool:
    return shape_of(value, context) is not None


def secret_hint(shape: Shape) -> str:
    """Where a value of this shape belongs instead (the stack's Secret Manager, read at run
    time by the trainer) and, for 40 hex digits, how to write a commit id."""
    secret = shape.env.lower().replace("_", "-")
    hint = (
        f"store it in Secret Manager (`gcloud secrets create {secret} --data-file=-`) and name "
        f"it under `secrets: {{{shape.env}: {secret}}}`: the trainer exports it as {shape.env} "
        "at run time"
    )
    return f"{hint}; {COMMIT_HINT}" if shape is WANDB_KEY else hint


def redact(text: str) -> str:
    """``text`` with every credential-shaped part replaced by its shape's name: what a message
    may quote of a value. Any 40 hex digits go (a message has no context to tell a commit)."""
    for shape in (*SHAPES, WANDB_KEY):
        text = shape.pattern.sub(lambda _m, s=shape: f"<{s.name}>", text)
    return RANDOM_TOKEN.pattern.sub(
        lambda m: f"<{RANDOM_TOKEN.name}>" if _random_token(m.group()) else m.group(), text
    )
