"""Headless Chromium for the tests of pages vtx writes (the review, the goodput report): the
browser's own layout and pixels, from the command line (no driver library)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium run once, headless, with a profile of its own under ``tmp_path``."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
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
        timeout=120,
        check=False,
    )
