"""Every CLI table reads in any terminal (vtx/views/fit_table.py's FitTable): where its columns
cannot be as wide as their longest word it prints `header: value` lines; no word is broken, no
value lost."""

from __future__ import annotations

import re

from tests.conftest import REPO


def test_no_cli_module_builds_a_table_but_through_fit_table() -> None:
    built = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "vtx").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"(?<![\w.])Table\(", line) and "class FitTable(Table)" not in line
    ]
    assert built == []
