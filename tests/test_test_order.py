"""The suite's own scheduling: the costliest modules are handed to xdist first, whole, and
everything else keeps its file order (tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.conftest import pytest_collection_modifyitems


@dataclass
class FakeItem:
    nodeid: str
    marks: dict[str, Any] = field(default_factory=dict)

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


def test_costly_modules_go_first_whole_and_the_rest_keep_their_order() -> None:
    slow = pytest.mark.slow.mark
    items = [
        FakeItem("a.py::quick"),
        FakeItem("b.py::one"),
        FakeItem("b.py::long", {"slow": pytest.mark.slow(cost_s=60).mark}),
        FakeItem("c.py::quick"),
        FakeItem("d.py::plain_slow", {"slow": slow}),
        FakeItem("e.py::longest", {"slow": pytest.mark.slow(cost_s=120).mark}),
        FakeItem("b.py::two"),
    ]
    pytest_collection_modifyitems(cast(list[pytest.Item], items))
    assert [i.nodeid for i in items] == [
        "e.py::longest",
        "b.py::one",
        "b.py::long",
        "b.py::two",
        "d.py::plain_slow",
        "a.py::quick",
        "c.py::quick",
    ]
