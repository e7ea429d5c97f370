"""The local package runner with an index (``PIP_INDEX_URL``, a closed stack's ``python_index``):
a package's dependencies come from that index, served here by a PEP 503 simple index on
127.0.0.1; without one the runner stays offline and installs the package alone."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HANG_S
from tests.json_handler import serving

REPO = Path(__file__).resolve().parents[4]


def wheel(project: Path, out: Path) -> Path:
    """A pure-Python wheel of ``project``, built offline with the interpreter's setuptools."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
         "--no-build-isolation", "-q", "-w", str(out), str(project)],
        check=True, capture_output=True,
    )  # fmt: skip
    (built,) = out.glob(f"{project.name}-*.whl")
    return built


def project(root: Path, name: str, requires: list[str], module: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "pyproject.toml").write_text(
        "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
        f"[project]\nname = '{name}'\nversion = '0.1'\ndependencies = {requires!r}\n"
        f"[tool.setuptools]\npy-modules = ['{name}']\n"
    )
    (root / name / f"{name}.py").write_text(module)
    return root / name


@pytest.fixture
def simple_index(tmp_path: Path) -> Iterator[str]:
    """A PEP 503 index holding one package, ``vtxdep``, on a free port of 127.0.0.1."""
    built = wheel(project(tmp_path / "src", "vtxdep", [], "VALUE = 42\n"), tmp_path / "wheels")
    package = tmp_path / "index" / "vtxdep"
    package.mkdir(parents=True)
    (package / built.name).write_bytes(built.read_bytes())
    (package / "index.html").write_text(f'<a href="{built.name}">{built.name}</a>')
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index")
    )
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/"


def run_package(gcs_emulator: str, bucket: str, tmp_path: Path, index: str | None):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    main = project(
        tmp_path / "src", "vtxmain", ["vtxdep"], "import vtxdep\nprint('dep says', vtxdep.VALUE)\n"
    )
    built = wheel(main, tmp_path / "wheels")
    client = storage.Client(project="vtx-test", credentials=AnonymousCredentials())
    client.bucket(bucket).blob(built.name).upload_from_filename(str(built))
    env = {**os.environ, "PYTHONPATH": str(REPO), "STORAGE_EMULATOR_HOST": gcs_emulator}
    env.pop("PIP_INDEX_URL", None)
    if index:
        env["PIP_INDEX_URL"] = index
    return subprocess.run(
        [sys.executable, "-m", "jobs.local.custom_jobs.package_runner",
         "--target", str(tmp_path / "packages"), f"--package=gs://{bucket}/{built.name}",
         "--", "vtxmain"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HANG_S, check=False,
    )  # fmt: skip


def test_dependencies_come_from_the_index_the_replica_names(
    gcs_emulator: str, gcs_bucket: str, simple_index: str, tmp_path: Path
) -> None:
    done = run_package(gcs_emulator, gcs_bucket, tmp_path, simple_index)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"dependencies from {simple_index}" in done.stdout
    assert "dep says 42" in done.stdout


def test_without_an_index_the_runner_installs_offline_and_alone(
    gcs_emulator: str, gcs_bucket: str, tmp_path: Path
) -> None:
    done = run_package(gcs_emulator, gcs_bucket, tmp_path, None)
    assert "dependencies from" not in done.stdout
    assert done.returncode != 0 and "No module named 'vtxdep'" in done.stderr
