"""The user's prices folder ($VTX_PRICES_DIR) holds whatever was left there: a table that does
not load (empty, binary, cut mid-write, list-shaped, 40 MB, a FIFO, a /dev/zero link, a
directory, a dangling link) is left out with one warning naming it and the fix, never read
unbounded and never fatal; the tables `vtx prices refresh` writes are written whole."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from jobs.core.catalog import load_catalog
from tests.conftest import HANG_S, REPO
from tests.jobs.core.price_tables import write_stand_in

NAME = "billing-training-us-central1-2099-01-01.yaml"
GOOD = "billing-training-europe-west4-2099-01-01.yaml"


def _table_text() -> str:
    return (
        "name: billing-training-us-central1-2099-01-01\nregion: us-central1\ncurrency: USD\n"
        'as_of: "2099-01-01"\nsource: https://cloudbilling.googleapis.com/v1/services/x/skus\n'
        "machines:\n  n1-standard-4: {usd_per_h: 0.25, basis: catalog}\naccelerators: {}\n"
    )


BROKEN: dict[str, Callable[[Path], None]] = {
    "empty": lambda p: p.write_bytes(b""),
    "binary": lambda p: p.write_bytes(bytes(range(256)) * 4),
    "cut mid-write": lambda p: p.write_text(_table_text().split("basis")[0]),
    "list-shaped": lambda p: p.write_text("- name: x\n- region: us-central1\n"),
    "40 MB": lambda p: os.truncate(p.open("wb").name, 40 * 2**20),
    "a FIFO": lambda p: os.mkfifo(p),
    "a /dev/zero link": lambda p: p.symlink_to("/dev/zero"),
    "a directory": lambda p: p.mkdir(),
    "a dangling link": lambda p: p.symlink_to(p.with_name("gone.yaml")),
}


def _within_deadline(call: Callable[[], object]) -> object:
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(call()), daemon=True)
    thread.start()
    thread.join(HANG_S)  # only a hang: a FIFO opened for reading, /dev/zero read to its end
    assert not thread.is_alive(), "hung"
    assert found, "raised (see the thread's traceback above)"
    return found[0]


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_table_that_does_not_load_is_left_out_with_one_warning(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    BROKEN[kind](tmp_path / NAME)
    write_stand_in(tmp_path, {"europe-west4": (1.0, 0.25)}, "2099-01-01")
    cat = _within_deadline(load_catalog)
    # The broken table's region keeps its shipped table; the good one beside it is used.
    assert cat.price_table("us-central1").name.startswith("vertex-training-us-central1-")  # type: ignore[attr-defined]
    europe = cat.for_stack(_local_stack()).price_table("europe-west4")  # type: ignore[attr-defined]
    assert europe.name == "billing-local-training-europe-west4-2099-01-01"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{tmp_path / NAME}: not a price table (")
    assert "run `vtx prices refresh` again or delete it" in warnings[0]
    assert "\n" not in warnings[0]


def _local_stack():
    from tests.conftest import stack_outputs

    return stack_outputs().model_copy(update={"vertex_endpoint": "http://127.0.0.1:1"})


def test_a_cut_write_leaves_the_previous_table_whole(tmp_path: Path) -> None:
    # A refresh whose disk fills up mid-write (a file size limit stands in for the full disk)
    # must leave yesterday's table as it was, and no half table beside it.
    previous = _table_text()
    (tmp_path / NAME).write_text(previous)
    script = f"""
import resource, signal
from pathlib import Path
from jobs.core.catalog import PriceTable
from jobs.pricing.refresh import PricesUnavailable, write_tables
import yaml
table = PriceTable.model_validate(yaml.safe_load({previous!r}))
table = table.model_copy(update={{"source": "x" * 100_000}})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_tables([table], Path({str(tmp_path)!r}))
except PricesUnavailable as exc:
    print("refused:", exc)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=HANG_S
    )
    assert "refused: cannot write the tables into" in done.stdout, done.stderr
    assert (tmp_path / NAME).read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]
    assert yaml.safe_load(previous)["name"] == NAME.removesuffix(".yaml")
