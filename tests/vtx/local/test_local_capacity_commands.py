"""`vtx local capacity show|set`."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from vtx.cli import app

REGION = "us-central1"


def test_up_refuses_a_bad_capacity_file_before_starting_anything(tmp_path: Path) -> None:
    bad = tmp_path / "capacity.yaml"
    bad.write_text(yaml.safe_dump({"regions": {REGION: {"accelerators": {"NVIDIA_L44": {}}}}}))
    data_dir = tmp_path / "platform"
    result = CliRunner().invoke(
        app, ["local", "up", "--capacity", str(bad), "--data-dir", str(data_dir)]
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 1
    assert f"regions.{REGION}.accelerators: 'NVIDIA_L44' is not an accelerator" in said
    assert "(top)" not in said
    assert not data_dir.exists()
