"""`vtx prices refresh --from-file`: tables from a saved services.skus.list answer, with no
stack and no network, ending with the coverage line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_DATA
from vtx.cli import app


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_refresh_from_saved_files_writes_tables_and_a_coverage_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path / "prices"))
    saved = tmp_path / "skus.json"
    pages = [
        json.loads((TEST_DATA / f"billing-skus-{s}.json").read_text())
        for s in ("vertex", "compute")
    ]
    saved.write_text(json.dumps(pages))
    done = CliRunner().invoke(
        app, ["prices", "refresh", "--from-file", str(saved), "--region", "us-central1"]
    )
    assert done.exit_code == 0, done.output
    out = _flat(done.output)
    assert "billing-training-us-central1-" in out and "billing-serving-us-central1-" in out
    assert 'NVIDIA_A100_80GB is worded "Nvidia A100 80gb GPU"' in out
    # The last line: figures known per region and usage, and the commonest reasons for unknown.
    last = done.output.strip().splitlines()[-1]
    assert re.match(
        r"coverage: us-central1 flex-start \d+/\d+, on-demand \d+/\d+, spot \d+/\d+", last
    )
    assert "unknown mostly: no SKU lists this region for it (" in last
    assert len(re.findall(r"\(\d+\)", last)) == 5
    written = sorted(p.name for p in (tmp_path / "prices").iterdir())
    assert written and all(n.startswith("billing-") for n in written)


def test_from_file_takes_no_stack(tmp_path: Path) -> None:
    saved = tmp_path / "skus.json"
    saved.write_text('{"skus": []}')
    both = ["prices", "refresh", "--from-file", str(saved), "--stack", "local"]
    done = CliRunner().invoke(app, both)
    assert done.exit_code == 2 and "give it without --stack" in _flat(done.output)
