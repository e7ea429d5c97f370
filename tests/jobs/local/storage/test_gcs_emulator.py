"""The local GCS answers objects.move (gcsfs `mv`, used by every DCP checkpoint save)."""

from __future__ import annotations

import json
import urllib.request

from jobs.core.stack import StackOutputs


def _post(url: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=b"{}", method="POST")
    with urllib.request.urlopen(request) as resp:
        return resp.status, json.load(resp)


def test_move_renames_an_object_through_the_json_api(local_platform: StackOutputs) -> None:
    import gcsfs

    bucket = local_platform.buckets.data
    fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=local_platform.gcs_endpoint)
    fs.pipe(f"{bucket}/move/a.txt", b"payload")

    base = f"{local_platform.gcs_endpoint}/storage/v1/b/{bucket}/o"
    status, moved = _post(f"{base}/move%2Fa.txt/moveTo/o/move%2Fb.txt")
    assert status == 200
    assert moved["name"] == "move/b.txt"
    fs.invalidate_cache()
    assert fs.ls(f"{bucket}/move") == [f"{bucket}/move/b.txt"]

    fs.mv(f"{bucket}/move/b.txt", f"{bucket}/move/c.txt")
    assert fs.cat(f"{bucket}/move/c.txt") == b"payload"
    assert not fs.exists(f"{bucket}/move/b.txt")
