"""Headless Chromium for the tests of pages vtx writes (the review, the goodput report): the
browser's own layout and pixels, from the command line (no driver library).

`make test` installs Debian's ``chromium`` where it is missing and it may (Makefile, ``browser``).
A test that takes the ``browser`` fixture skips where there is none, saying how to install it,
except under ``CI=true``, where a missing browser fails it: CI must test the pages."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MISSING = (
    "no chromium here: `make test` installs Debian's chromium where it may (root or passwordless "
    "sudo); elsewhere run `sudo apt-get install chromium` or put a chromium on PATH"
)
RUN_S = 120
"""A hang-catcher: one page loads and renders in a second or two."""


def chromium_or_stop(path: str, environ: Mapping[str, str]) -> str:
    """``path`` where a browser is there; else the test skips, or fails under ``CI=true``."""
    if Path(path).exists():
        return path
    if environ.get("CI") == "true":
        pytest.fail(f"{MISSING} (CI=true: the browser tests must run)")
    pytest.skip(MISSING)


@pytest.fixture
def browser() -> str:
    """The Chromium the tests run (see ``chromium_or_stop``)."""
    return chromium_or_stop(CHROMIUM, os.environ)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium run once, headless, with a profile of its own under ``tmp_path``: no sandbox
    (root in CI), no GPU, and nothing fetched from the network (no QUIC probes, no component or
    sync traffic), so it runs the same offline."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=RUN_S,
        check=False,
    )
