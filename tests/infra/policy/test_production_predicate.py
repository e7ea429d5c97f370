"""Production is one fact (``jobs.core.stack.PROD_ENVIRONMENTS``), asked through one predicate.

A literal ``"prod"`` compared anywhere else is how a stack named ``production`` once skipped its
prod job policies; the source scan below keeps such a literal from coming back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobs.core.stack import PROD_ENVIRONMENTS, is_production

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("jobs", "infra", "trainer")
HOME = ROOT / "jobs" / "core" / "stack.py"


@pytest.mark.parametrize("environment", ["prod", "production", "Prod", " PRODUCTION "])
def test_every_spelling_of_production_is_production(environment: str) -> None:
    assert is_production(environment)


@pytest.mark.parametrize("environment", [None, "", "dev", "staging", "preprod", "prod-like"])
def test_other_environments_are_not_production(environment: str | None) -> None:
    assert not is_production(environment)


def _production_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.strip().lower() in PROD_ENVIRONMENTS
    ]


def test_no_code_names_production_except_through_the_predicate() -> None:
    found = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != HOME
        for hit in _production_literals(path)
    ]
    assert found == [], "use jobs.core.stack.is_production instead of comparing with a literal"
