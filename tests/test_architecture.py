"""The architecture rules import-linter cannot see (its contracts, in pyproject.toml, run as
`lint-imports` in `make test`): our own modules are imported at module top, never inside a
function; only heavy third-party libraries may be deferred that way, so a cycle cannot hide."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("vtx", "infra", "jobs", "trainer")


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def own_imports_inside_functions(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of one of our packages (or a relative one) made inside a
    function body of ``source``."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for module in _imported_modules(node):
                    if module.startswith(".") or module.split(".")[0] in PACKAGES:
                        found.append((node.lineno, module))
    return sorted(set(found))


def test_the_check_finds_a_deferred_import_of_ours_and_ignores_heavy_ones() -> None:
    source = (
        "import jobs.core.stack\n"
        "def f():\n    from jobs.custom_jobs.validate import validate_document\n"
        "def g():\n    import torch\n    from google.cloud import aiplatform_v1\n"
        "class C:\n    def m(self):\n        from . import sibling\n"
    )
    assert own_imports_inside_functions(source) == [(3, "jobs.custom_jobs.validate"), (9, ".")]


@pytest.mark.parametrize("package", PACKAGES)
def test_our_modules_are_imported_at_module_top(package: str) -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {module} inside a function"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, module in own_imports_inside_functions(path.read_text())
    ]
    assert offenders == []


def cli_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the CLI (``vtx``) anywhere in ``source``."""
    return sorted(
        (node.lineno, module)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for module in _imported_modules(node)
        if module.split(".")[0] == "vtx"
    )


def test_the_cli_check_finds_imports_at_any_depth() -> None:
    source = "import vtx.cli\ndef f():\n    from vtx.views.output import money\nimport jobs\n"
    assert cli_imports(source) == [(1, "vtx.cli"), (3, "vtx.views.output")]


# What measures the CLI itself: `vtx launch` run in-process under a profile hook.
MEASURES_THE_CLI = {"bench/launch_path.py"}


@pytest.mark.parametrize("folder", ["tests/jobs", "bench"])
def test_tests_of_jobs_and_the_benchmarks_reach_jobs_without_the_cli(folder: str) -> None:
    """The pipeline lives below the CLI, so what tests it or measures it needs nothing of vtx;
    the CLI's own tests are in tests/vtx, and MEASURES_THE_CLI measures it."""
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted((REPO / folder).rglob("*.py"))
        if str(path.relative_to(REPO)) not in MEASURES_THE_CLI
        for line, module in cli_imports(path.read_text())
    ]
    assert offenders == []
