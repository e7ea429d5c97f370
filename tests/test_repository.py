"""What a user's clone holds must stand on its own: no tracked file points outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".json", ".txt", ".cfg", ""}


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    paths = [ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES and p.is_file()]


def test_no_tracked_file_points_outside_the_repository() -> None:
    this_file = Path(__file__).resolve()
    outside = "../" + "shared"  # spelled apart so this test does not find itself
    offenders = [
        str(p.relative_to(ROOT))
        for p in _tracked_text_files()
        if p != this_file and outside in p.read_text(errors="replace")
    ]
    assert offenders == [], f"files pointing at {outside}/ (a clone lacks it): {offenders}"
