"""What a user's clone holds must stand on its own and say what is in it: no tracked file points
outside it, every repository path and dotted name its docs cite resolves, and every module is in
its folder's map (the nearest README.md up its folder tree)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".json", ".txt", ".cfg", ""}
# The packages whose dotted names docs cite and whose modules a README maps.
PACKAGES = ("bench", "infra", "jobs", "trainer", "vtx")
# A cited token with one of these endings names a file; without one it may name a module.
FILE_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".json", ".jsonl", ".toml", ".txt")
# Backticked dotted names in a package's namespace that name no Python object, each on purpose.
NOT_PYTHON_NAMES = {
    "jobs.create": "Vertex's REST method (bench/RESULTS.md's load mix)",
    "jobs.get": "Vertex's REST method (bench/RESULTS.md's load mix)",
    "jobs.list": "Vertex's REST method (bench/RESULTS.md's load mix)",
    "vtx.run_id": "a key the trainer adds to a tracker's config (trainer/README.md)",
    "vtx.trial_id": "a key the trainer adds to a tracker's config (trainer/README.md)",
}

BACKTICKED = re.compile(r"`([^`\s]+)`")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
"""Inline code: a pattern like `[a-z]([a-z0-9-])` there is no link."""
DOTTED_NAME = re.compile(rf"(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+")
STATEMENT_STARTS = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL}
# What follows a cited token in a sentence, or a call's parentheses.
TRAILING = re.compile(r"(?:\(\))?[.,:;)]*$")
RELATIVE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# The packages whose READMEs may cite a name from a module by the module's file stem.
RELATIVE_NAMES_IN = ("bench", "jobs", "trainer", "vtx")


@cache
def _tracked_files(root: Path) -> tuple[Path, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    paths = [root / name for name in listed.split("\0") if name]
    return tuple(p for p in paths if p.is_file())


def _tracked_text_files() -> list[Path]:
    return [p for p in _tracked_files(ROOT) if p.suffix in TEXT_SUFFIXES]


def test_no_tracked_file_points_outside_the_repository() -> None:
    this_file = Path(__file__).resolve()
    outside = "../" + "shared"  # spelled apart so this test does not find itself
    offenders = [
        str(p.relative_to(ROOT))
        for p in _tracked_text_files()
        if p != this_file and outside in p.read_text(errors="replace")
    ]
    assert offenders == [], f"files pointing at {outside}/ (a clone lacks it): {offenders}"


# --- what docs cite -----------------------------------------------------------------------------


def _prose(path: Path) -> str:
    """A doc's text: a Markdown file whole; a Python file's comments and string statements (its
    docstrings; its other strings are data the tests exercise, not citations)."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return text
    # One pass of the tokenizer, about half the time of also parsing each file with ast.
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    prose = [
        token.string
        for before, token, after in zip([None, *tokens[:-1]], tokens, tokens[1:], strict=False)
        if token.type == tokenize.COMMENT
        or (token.type == tokenize.STRING and _is_statement(before, after))
    ]
    return "\n".join(prose)


def _is_statement(before: tokenize.TokenInfo | None, after: tokenize.TokenInfo) -> bool:
    """Whether a string is a statement of its own (a docstring), not part of an expression."""
    starts_line = before is None or before.type in STATEMENT_STARTS
    return starts_line and after.type in (tokenize.NEWLINE, tokenize.ENDMARKER)


def _cited_tokens(prose: str) -> Iterator[str]:
    """Backticked tokens, trailing punctuation, a call's `()` and a pytest `::test` dropped; those
    holding a placeholder (`<run>`, `*`, `{a,b}`, `$VAR`) or naming a URL or an absolute path are
    not citations of a repository file."""
    for match in BACKTICKED.finditer(prose):
        token = TRAILING.sub("", match.group(1).split("::")[0])
        if re.search(r"[<>*{}$]", token) or token.startswith(("/", "~", "gs://", "http")):
            continue
        yield token


@cache
def _docs(root: Path) -> tuple[tuple[Path, str], ...]:
    return tuple(
        (path, _prose(path)) for path in _tracked_files(root) if path.suffix in (".md", ".py")
    )


# --- paths --------------------------------------------------------------------------------------


def _top_folders(root: Path) -> list[str]:
    return sorted({p.relative_to(root).parts[0] for p in _tracked_files(root) if p.parent != root})


def _bare_path_pattern(root: Path) -> re.Pattern[str]:
    """A path in running text: it starts at a top-level folder and ends in a file suffix (so that
    prose like "infra/jobs/vtx" is not read as one)."""
    tops = "|".join(re.escape(top) for top in _top_folders(root))
    suffixes = "|".join(re.escape(suffix) for suffix in FILE_SUFFIXES)
    return re.compile(rf"(?<![\w./-])((?:{tops})/[\w./-]*?(?:{suffixes}))(?![\w/])")


def _exists(base: Path, token: str) -> bool:
    """`token` under `base`: a file, a folder, or (no suffix) a module."""
    target = base / token.rstrip("/")
    return target.exists() or target.with_name(target.name + ".py").is_file()


def _ancestors(root: Path, doc: Path) -> list[Path]:
    return [doc.parent, *[p for p in doc.parent.parents if p.is_relative_to(root)]]


def _stale(root: Path, doc: Path, token: str) -> bool:
    """A cited path is read from the citing file's folder or one above it (a README's map names
    its modules relative to itself; most docs cite from the repository root). It is a path of
    this repository when its first folder is one there; others (`aiplatform_v1/types/...`) are
    another project's."""
    folders = _ancestors(root, doc)
    first = token.split("/")[0]
    if first in (".", ".."):  # from the working directory, or a Markdown link's business
        return False
    if not any((folder / first).is_dir() for folder in folders):
        return False
    return not any(_exists(folder, token) for folder in folders)


def _unknown_file_names(root: Path, readme: Path, prose: str) -> list[str]:
    """A package README's bare `name.py`: one of its folder's files or of its tests' (tests/
    mirrors the packages); other docs name other projects' files that way too."""
    folder = readme.parent.relative_to(root)
    if readme.name != "README.md" or not folder.parts or folder.parts[0] not in PACKAGES:
        return []
    homes = (root / folder, root / "tests" / folder)
    known = {p.name for p in _tracked_files(root) if any(p.is_relative_to(h) for h in homes)}
    names = {t for t in _cited_tokens(prose) if "/" not in t and t.endswith(".py")}
    return sorted(names - known)


def _stale_paths(root: Path) -> list[str]:
    bare = _bare_path_pattern(root)
    stale = []
    for doc, prose in _docs(root):
        cited = {token for token in _cited_tokens(prose) if "/" in token}
        for token in sorted(cited | set(bare.findall(prose))):
            if _stale(root, doc, token):
                stale.append(f"{doc.relative_to(root)}: {token}")
        for name in _unknown_file_names(root, doc, prose):
            stale.append(f"{doc.relative_to(root)}: {name} (no such file in its folder)")
        if doc.suffix == ".md":
            for link in MARKDOWN_LINK.findall(CODE_SPAN.sub("", prose)):
                target = link.split("#")[0]
                if target and ":" not in target and not (doc.parent / target).exists():
                    stale.append(f"{doc.relative_to(root)}: link {link}")
    return stale


def test_every_cited_repository_path_exists() -> None:
    stale = _stale_paths(ROOT)
    assert stale == [], "docs cite paths that do not exist (fix or drop each):\n" + "\n".join(stale)


# --- dotted names -------------------------------------------------------------------------------


def _fields(owner: object) -> set[str]:
    """Names a class declares without binding them: a pydantic model's or a dataclass's fields."""
    names: set[str] = set(getattr(owner, "model_fields", None) or ())
    for klass in getattr(owner, "__mro__", ()):
        names |= set(inspect.get_annotations(klass))
    return names


def _unresolved(name: str) -> str | None:
    """Why `name` names no module, attribute or field; None when it does."""
    parts = name.split(".")
    owner: object = importlib.import_module(parts[0])
    for depth, part in enumerate(parts[1:], start=2):
        dotted = ".".join(parts[:depth])
        is_package = isinstance(owner, ModuleType) and hasattr(owner, "__path__")
        if is_package and importlib.util.find_spec(dotted) is not None:
            if part == "__main__":  # importing it would run the program; that it exists is enough
                return None if depth == len(parts) else f"{dotted} is a program, not a namespace"
            owner = importlib.import_module(dotted)
        elif hasattr(owner, part):
            owner = getattr(owner, part)
        elif part in _fields(owner):
            return None if depth == len(parts) else f"{dotted} is a field, not a namespace"
        else:
            return f"{'.'.join(parts[: depth - 1])} has no {part}"
    return None


def _why_unresolved(name: str) -> str | None:
    try:
        return _unresolved(name)
    except ImportError as error:
        return f"import failed: {error}"


def _module_names(root: Path, readme: Path) -> dict[str, list[str]]:
    """The modules a package README may cite by file stem (`checks.validate_template_doc`), each
    stem's dotted names. infra's READMEs are left out: they cite Pulumi config keys
    (`network.egress`) named after the components that read them."""
    folder = readme.parent.relative_to(root)
    if readme.name != "README.md" or not folder.parts or folder.parts[0] not in RELATIVE_NAMES_IN:
        return {}
    names: dict[str, list[str]] = {}
    for module in _tracked_files(root):
        if module.suffix == ".py" and module.is_relative_to(root / folder):
            dotted = ".".join(module.relative_to(root).with_suffix("").parts)
            names.setdefault(module.stem, []).append(dotted)
    return names


def _unresolved_names(root: Path) -> list[str]:
    unresolved = []
    for doc, prose in _docs(root):
        modules = _module_names(root, doc)
        for token in sorted(set(_cited_tokens(prose)) - set(NOT_PYTHON_NAMES)):
            if token.endswith(FILE_SUFFIXES):
                continue
            if DOTTED_NAME.fullmatch(token):
                why = _why_unresolved(token)
            elif RELATIVE_NAME.fullmatch(token) and token.split(".")[0] in modules:
                stem, rest = token.split(".", 1)
                whys = [_why_unresolved(f"{module}.{rest}") for module in modules[stem]]
                why = None if None in whys else "; ".join(str(w) for w in whys)
            else:
                continue
            if why is not None:
                unresolved.append(f"{doc.relative_to(root)}: {token} ({why})")
    return unresolved


def test_every_cited_dotted_name_resolves() -> None:
    unresolved = _unresolved_names(ROOT)
    assert unresolved == [], "docs cite names that do not resolve:\n" + "\n".join(unresolved)


# --- folder maps --------------------------------------------------------------------------------


def _nearest_readme(root: Path, module: Path) -> Path | None:
    folder = module.parent
    while folder != root:
        if (folder / "README.md").is_file():
            return folder / "README.md"
        folder = folder.parent
    return None


def _unmapped_modules(root: Path) -> list[str]:
    """Modules whose nearest README.md names them by neither their path from it, their file name
    nor their repository path (the repository's own README is no folder's map)."""
    unmapped = []
    for module in _tracked_files(root):
        repository_path = module.relative_to(root)
        if repository_path.parts[0] not in PACKAGES or module.suffix != ".py":
            continue
        if module.name == "__init__.py":
            continue
        readme = _nearest_readme(root, module)
        if readme is None:
            unmapped.append(f"{repository_path}: no README.md in its folder or above")
            continue
        mentioned = set(re.findall(r"[\w./-]*\w\.py\b", readme.read_text()))
        names = {module.relative_to(readme.parent).as_posix(), module.name, str(repository_path)}
        if not names & mentioned:
            unmapped.append(f"{repository_path}: not in {readme.relative_to(root)}")
    return unmapped


def test_every_module_is_in_its_folders_map() -> None:
    unmapped = _unmapped_modules(ROOT)
    assert unmapped == [], "add each module to its README's map:\n" + "\n".join(unmapped)


# --- the checks catch what they are for -----------------------------------------------------------


def _planted_repository(root: Path) -> Path:
    """A repository whose docs cite a stale path, a bad name and an unmapped module beside the
    good ones; names resolve against the real packages (the planted files are not importable)."""
    files = {
        "jobs/README.md": (
            "| `launch/checks.py` | cites `jobs/launch/checks.py`, `jobs/gone.py`, `launch/gone/`"
            " and `aiplatform_v1/types/job.py` (another project's) |\n"
            "| `renamed.py` | `jobs.core.formats.money`, `jobs.core.stack.StackOutputs.egress`,"
            " `jobs.core.no_such_name`, `checks.validate_template_doc`, `checks.no_such_name`,"
            " `vtx.__main__` |\n"
            "See [the checks](launch/checks.py) and [a lost page](launch/lost.md).\n"
        ),
        "jobs/launch/checks.py": (
            '"""Read with jobs/launch/checks.py; jobs/docstring_gone.py is stale."""\n\n'
            "# jobs/comment_gone.py is stale too\n"
            'DATA = "jobs/a_string_is_data.py"\n'
        ),
        "jobs/launch/unmapped.py": "",
        "bench/unmapped.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


def test_the_path_check_finds_stale_paths_and_links(tmp_path: Path) -> None:
    root = _planted_repository(tmp_path)
    assert _stale_paths(root) == [
        "jobs/README.md: jobs/gone.py",
        "jobs/README.md: launch/gone/",
        "jobs/README.md: renamed.py (no such file in its folder)",
        "jobs/README.md: link launch/lost.md",
        "jobs/launch/checks.py: jobs/comment_gone.py",
        "jobs/launch/checks.py: jobs/docstring_gone.py",
    ]


def test_the_name_check_finds_names_that_do_not_resolve(tmp_path: Path) -> None:
    root = _planted_repository(tmp_path)
    assert _unresolved_names(root) == [
        "jobs/README.md: checks.no_such_name (jobs.launch.checks has no no_such_name)",
        "jobs/README.md: jobs.core.no_such_name (jobs.core has no no_such_name)",
    ]


def test_the_map_check_finds_unmapped_modules(tmp_path: Path) -> None:
    root = _planted_repository(tmp_path)
    assert _unmapped_modules(root) == [
        "bench/unmapped.py: no README.md in its folder or above",
        "jobs/launch/unmapped.py: not in jobs/README.md",
    ]
