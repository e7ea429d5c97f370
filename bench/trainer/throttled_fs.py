"""A local fsspec filesystem whose writes run at a GCS-like speed: `throttled:///path`.

A checkpoint to GCS from one VM is bounded by one stream's upload bandwidth and a per-object
request latency; the local disk of this machine is much faster, which would make synchronous
checkpoints look free. Writes here sleep for `bytes / bandwidth` (sleeping releases the GIL,
as waiting on a socket does) and each file pays `latency_s` when it is closed. Reads are not
throttled: the benchmark measures saves.

Set the speed with `configure(bandwidth_bytes_per_s, latency_s)` before use.
"""

from __future__ import annotations

import time
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem, make_path_posix

PROTOCOL = "throttled"
_SPEED = {"bandwidth_bytes_per_s": 100e6, "latency_s": 0.05}


def configure(bandwidth_bytes_per_s: float, latency_s: float) -> None:
    _SPEED.update(bandwidth_bytes_per_s=bandwidth_bytes_per_s, latency_s=latency_s)
    fsspec.register_implementation(PROTOCOL, ThrottledFileSystem, clobber=True)


class _ThrottledFile:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        time.sleep(n / _SPEED["bandwidth_bytes_per_s"])
        return self._inner.write(data)

    def close(self) -> None:
        time.sleep(_SPEED["latency_s"])
        self._inner.close()

    def __enter__(self) -> _ThrottledFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class ThrottledFileSystem(LocalFileSystem):
    protocol = (PROTOCOL,)
    root_marker = "/"

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
        return make_path_posix(path).rstrip("/") or cls.root_marker

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        inner = super()._open(path, mode, **kwargs)
        return _ThrottledFile(inner) if "w" in mode or "a" in mode else inner
