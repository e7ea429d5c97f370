"""What Vertex's prebuilt training container does for a ``pythonPackageSpec`` replica: fetch the
``packageUris`` from Cloud Storage, install them, then run ``python -m MODULE ARGS``.

`python -m jobs.local.custom_jobs.package_runner --target DIR --package gs://B/O ...
-- MODULE ARG...`

The packages come from the GCS emulator (``STORAGE_EMULATOR_HOST``, which every replica has)
and are installed with ``pip install --no-deps --no-index --no-build-isolation --target DIR``:
no network is reached (``--no-index``; a package's dependencies are the image's business, and
locally the image is this interpreter's environment), a source distribution such as the one the
SDK's ``CustomTrainingJob`` and ``CustomJob.from_local_script`` upload is built with the
interpreter's own setuptools (build isolation would fetch setuptools from an index), and the
target directory keeps the replica's packages apart from the environment. pip rather than
unpacking the archive by hand: it handles wheels, sdists and src layouts alike. The module then
replaces this process (``exec``), so the platform's signals reach it directly.

With ``PIP_INDEX_URL`` in the replica's environment (``pythonPackageSpec.env``; on a stack with
no route to the internet, its ``python_index``, the PyPI remote repository), the packages'
dependencies are installed from that index, as Vertex's executor installs them from PyPI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
INSTALL_FAILED = 1


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/object`` -> (bucket, object); ValueError for anything else."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    if not uri.startswith("gs://") or not bucket or not name:
        raise ValueError(f"package URI {uri!r} is not gs://BUCKET/OBJECT")
    return bucket, name


def spec_problems(spec: dict) -> list[str]:
    """What a pythonPackageSpec needs to run (PythonPackageSpec marks pythonModule and
    packageUris required), each named by its field."""
    problems = []
    if not spec.get("pythonModule"):
        problems.append("pythonModule: required, the module to run (e.g. trainer.task)")
    uris = spec.get("packageUris", [])
    if not uris:
        problems.append("packageUris: required, the gs:// URIs of the packages to install")
    for i, uri in enumerate(uris):
        try:
            split_gcs_uri(uri)
        except ValueError as exc:
            problems.append(f"packageUris[{i}]: {exc}")
    return problems


def download(endpoint: str, uri: str, directory: Path) -> Path:
    """Fetch one object from the emulator into ``directory`` under its own file name (pip reads
    the kind of archive from it)."""
    bucket, name = split_gcs_uri(uri)
    url = (
        f"{endpoint.rstrip('/')}/download/storage/v1/b/{bucket}/o/"
        f"{urllib.parse.quote(name, safe='')}?alt=media"
    )
    path = directory / Path(name).name
    with urllib.request.urlopen(url) as resp, path.open("wb") as out:
        shutil.copyfileobj(resp, out)
    return path


INDEX_ENV = "PIP_INDEX_URL"


def install(files: list[Path], target: Path, index_url: str | None = None) -> int:
    """pip's exit code; its output goes to the replica's log, as the container's does. Offline
    unless ``index_url`` names where the dependencies come from."""
    command = [sys.executable, "-m", "pip", "install"]
    command += ["--index-url", index_url] if index_url else ["--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--no-cache-dir", "--disable-pip-version-check"]
    command += ["--target", str(target)]
    return subprocess.call([*command, *map(str, files)], stdin=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, required=True, help="install directory")
    parser.add_argument("--package", action="append", default=[], help="a gs:// package URI")
    parser.add_argument("module", help="the pythonModule to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its args")
    options = parser.parse_args(argv)
    # A restarted replica starts from a fresh install, as a new VM would.
    shutil.rmtree(options.target, ignore_errors=True)
    downloads = options.target.parent / f"{options.target.name}.downloads"
    shutil.rmtree(downloads, ignore_errors=True)
    downloads.mkdir(parents=True)
    try:
        endpoint = os.environ[EMULATOR_ENV]
        files = [download(endpoint, uri, downloads) for uri in options.package]
    except (KeyError, ValueError, OSError, urllib.error.URLError) as exc:
        print(f"could not fetch the python packages {options.package}: {exc!r}", flush=True)
        sys.exit(INSTALL_FAILED)
    index_url = os.environ.get(INDEX_ENV) or None
    source = f", dependencies from {index_url}" if index_url else ""
    print(f"installing {', '.join(options.package)} into {options.target}{source}", flush=True)
    if files and install(files, options.target, index_url) != 0:
        print("pip could not install the python packages (see above)", flush=True)
        sys.exit(INSTALL_FAILED)
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(options.target), path]))
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", options.module, *args])


if __name__ == "__main__":
    main()
