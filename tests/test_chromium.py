"""The browser tests' guard (tests/chromium.py): where Chromium is missing they skip and say how
to install it, except under CI=true, where they fail: CI must never pass without the pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chromium import MISSING, chromium_or_stop


def test_a_browser_that_is_there_is_used(tmp_path: Path) -> None:
    there = tmp_path / "chromium"
    there.touch()
    assert chromium_or_stop(str(there), {"CI": "true"}) == str(there)


def test_a_missing_browser_skips_and_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="sudo apt-get install chromium"):
        chromium_or_stop(str(tmp_path / "absent"), {})
    with pytest.raises(pytest.skip.Exception):
        chromium_or_stop(str(tmp_path / "absent"), {"CI": "false"})


def test_a_missing_browser_fails_under_ci(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        chromium_or_stop(str(tmp_path / "absent"), {"CI": "true"})
    assert MISSING in str(failed.value) and "CI=true" in str(failed.value)
