"""What a Cloud Storage name may be: GCS's naming rules for buckets and objects, and what a
``gs://`` folder URI a job names may be. Pure checks, shared by the template rules (a job's
``baseOutputDirectory``) and the local platform (its control plane, GCS emulator and uploads),
so that `vtx validate` refuses what the local platform would.
"""

from __future__ import annotations

BUCKET_NAME_MAX = 63
BUCKET_NAME_DOTTED_MAX = 222
OBJECT_NAME_MAX_BYTES = 1024
ACME_PREFIX = ".well-known/acme-challenge/"


def bucket_name_problem(name: str) -> str | None:
    """GCS's bucket naming rules (cloud.google.com/storage/docs/buckets#naming), or None."""
    if not 3 <= len(name) <= BUCKET_NAME_DOTTED_MAX:
        return f"bucket name {name!r} must be 3 to {BUCKET_NAME_MAX} characters long"
    if not all(c.islower() or c.isdigit() or c in "-_." for c in name) or not name.isascii():
        return f"bucket name {name!r} may hold only lowercase letters, digits, '-', '_' and '.'"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return f"bucket name {name!r} must start and end with a letter or a digit"
    parts = name.split(".")
    if len(parts) == 1 and len(name) > BUCKET_NAME_MAX:
        return f"bucket name {name!r} is longer than {BUCKET_NAME_MAX} characters"
    if any(not part or len(part) > BUCKET_NAME_MAX for part in parts):
        return (
            f"bucket name {name!r}: each dot-separated part must be 1 to {BUCKET_NAME_MAX} "
            f"characters long"
        )
    if len(parts) == 4 and all(part.isdigit() for part in parts):
        return f"bucket name {name!r} may not be an IP address"
    if name.startswith("goog") or "google" in name:
        return f"bucket name {name!r} may not start with 'goog' or contain 'google'"
    return None


def object_name_problem(name: str) -> str | None:
    """GCS's object naming rules (cloud.google.com/storage/docs/objects#naming), or None. Any
    other UTF-8 of 1 to 1,024 bytes is a name: the emulator keys objects by a hash of the name,
    so ``a\\b``, ``a/../b`` or ``x/`` are names like any other, never paths."""
    size = len(name.encode("utf-8", errors="surrogatepass"))
    if not 1 <= size <= OBJECT_NAME_MAX_BYTES:
        return f"object names must be 1 to {OBJECT_NAME_MAX_BYTES} bytes of UTF-8, not {size}"
    if any(c in name for c in "\x00\r\n"):
        return "object names may not contain NUL, carriage return or line feed"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        return "object names must be valid UTF-8"
    if name in (".", ".."):
        return f"an object may not be named {name!r}"
    if name.startswith(ACME_PREFIX):
        return f"object names may not start with {ACME_PREFIX!r}"
    return None


def split_gs_uri(uri: str, write: str) -> tuple[str, str]:
    """``gs://BUCKET[/REST]`` -> (BUCKET, REST); a ValueError naming what is wrong (not
    ``gs://``, or a bucket GCS refuses) and, for the first, the form to ``write``."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri!r} is not a gs:// URI; write {write}")
    bucket, _, rest = uri.removeprefix("gs://").partition("/")
    problem = bucket_name_problem(bucket)
    if problem:
        raise ValueError(f"{uri}: {problem}")
    return bucket, rest


def gcs_folder_problem(uri: str) -> str | None:
    """A ``gs://BUCKET/PATH`` folder URI (``baseOutputDirectory``: replicas get it as
    AIP_MODEL_DIR and friends), or why not: not ``gs://``, a bucket GCS refuses, or ``.`` and
    ``..`` folders, which would climb out of the folder (or the bucket) on a file system view
    such as gcsfuse."""
    if not uri.startswith("gs://"):
        return f"{uri!r} is not a Cloud Storage URI; write gs://BUCKET/PATH"
    bucket, _, path = uri.removeprefix("gs://").partition("/")
    problem = bucket_name_problem(bucket) or (
        "'.' and '..' are not folders of a bucket"
        if any(part in (".", "..") for part in path.split("/"))
        else None
    )
    return f"{uri!r}: {problem}; write gs://BUCKET/PATH" if problem else None
