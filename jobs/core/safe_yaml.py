"""Reading YAML that a person wrote: whatever the file holds, the answer is a `Problem` that
names the place (key path, or line and column) within a second, never a traceback.

PyYAML alone turns a 5,000-deep ``[[[[`` into a RecursionError (its composer recurses; libyaml's
C composer overflows the C stack and kills the process near 100,000 levels), a chain of aliases
("billion laughs") into minutes of work for whoever walks the result, a non-UTF-8 byte into a
UnicodeDecodeError, an unpaired surrogate escape (``"\\ud800"``) into a string no API accepts,
and a repeated key into a silent overwrite. So, in this order:

1. only a regular file is opened (a FIFO would block, a device never end), its size is checked
   before reading and the read itself is bounded (jobs.core.user_io);
2. the bytes must be UTF-8: the first bad byte is named by offset, line and column;
3. one pass over the parser's events, which is iterative and stops at the first problem,
   bounds the nesting depth and the number of values (an alias counts as everything it
   repeats) and refuses unpaired surrogates, each with its key path;
4. libyaml builds the document (PyYAML's own loader where libyaml is missing) with a
   SafeLoader that refuses a key written twice in one mapping.

Used by job templates and gcloud documents (`jobs.spec.template`) and stack configs
(`infra.config`).
The trainer ships alone and keeps a smaller copy in `trainer/config/safe_yaml.py`; a test pins the
two to the same answers."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobs.core.credentials import redact, secret_shape
from jobs.core.problems import Problem, join_path
from jobs.core.user_io import UserFileError, read_user_file

MAX_BYTES = 256 * 1024
"""Job templates and stack configs are a few KB; 256 KiB is generous and parses in ~0.2 s."""
MAX_DEPTH = 32
"""Nesting levels of mappings and lists. A gcloud CustomJob needs 6, a template 4."""
MAX_VALUES = 20_000
"""Scalars, mappings and lists in one document, aliases counted as what they repeat. The
largest legitimate job (4 pools x 100 env vars, long args) has a few thousand."""
FILE = "(file)"
"""The path of a problem with the file as a whole (missing, too big, not UTF-8)."""

SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader, several times faster than PyYAML's own, which stands in where libyaml
is missing."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_KEY_SHOWN_CHARS = 40
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_INT_TAG = "tag:yaml.org,2002:int"
_INT_MAX_CHARS = 67  # "-0b" and 64 binary digits: any longer literal is out of range


class YamlInputError(Exception):
    """The text could not be read as a document; ``problem`` says where and why."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


def shown(text: str) -> str:
    """``text`` safe to print on any terminal: no surrogates (from non-UTF-8 file names)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to a line, printable: a problem quotes what it got, not all of it,
    and never a credential (judged whole: a cut one would be too short to recognise)."""
    shape = secret_shape(value) if isinstance(value, str) else None
    return f"<{shape}>" if shape else shown(redact(_REPR.repr(value)))


def read_yaml_file(path: Path) -> Any:
    """The document in ``path``; raises YamlInputError for every way a file can be unusable
    (a FIFO, a device or a directory among them: jobs.core.user_io reads regular files only)."""
    source = shown(str(path))
    try:
        data = read_user_file(
            path,
            MAX_BYTES,
            too_big="a job or stack file is a few KB: keep data, long lists and weights in files "
            "the job reads, not in this file",
        )
    except UserFileError as exc:
        hint = "give the path of a YAML file" if exc.reason == "is a directory" else exc.hint
        raise _file_error(source, exc.reason, hint) from None
    return load_yaml_text(_decode_utf8(data, source), source)


def _decode_utf8(data: bytes, source: str | None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YamlInputError(
            Problem(
                f"line {line}, column {column}",
                f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}",
                "save the file as UTF-8 (a binary or UTF-16 file cannot be read here)",
                source,
            )
        ) from None


def load_yaml_text(text: str, source: str | None = None) -> Any:
    """One YAML document from ``text`` within the limits above (duplicate keys refused)."""
    if len(text) > MAX_BYTES:
        raise _file_error(source, f"is {len(text):,} characters; at most {MAX_BYTES:,}", None)
    check_text(text, source)
    try:
        mapping_paths = _check_events(text, source)
        loader = _Loader(text)
        loader.mapping_paths = mapping_paths
        loader.source = source
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise YamlInputError(_yaml_problem(exc, text, source)) from None


def check_text(text: str, source: str | None = None) -> None:
    """Refuse text holding surrogates: how Python keeps non-UTF-8 bytes of a command line."""
    bad = _SURROGATE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise YamlInputError(
            Problem(
                f"line {line}, column {column}",
                _surrogate_message(bad.group()),
                "write UTF-8 text",
                source,
            )
        )


def _surrogate_message(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # how Python keeps a non-UTF-8 byte of argv or a file name
        return f"not UTF-8 text: byte 0x{code - 0xDC00:02x}"
    return f"an unpaired surrogate \\u{code:04x} is not a character: no API accepts it"


def _file_error(source: str | None, message: str, hint: str | None) -> YamlInputError:
    return YamlInputError(Problem(FILE, message, hint, source))


def _yaml_problem(exc: yaml.YAMLError, text: str, source: str | None) -> Problem:
    if isinstance(exc, yaml.reader.ReaderError):  # a control character such as NUL
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return Problem(
            f"line {line}, column {column}",
            f"invalid YAML: character #x{exc.character:04x} is not allowed in YAML text",
            "remove it, or write it as an escape inside double quotes",
            source,
        )
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else FILE
    reason = getattr(exc, "problem", None) or str(exc)
    return Problem(where, f"invalid YAML: {reason}", None, source)


@dataclass(slots=True)
class _Level:
    """An open mapping or list during the event pass."""

    path: str
    is_map: bool
    is_key: bool
    """This mapping or list is itself a (complex) mapping key."""
    anchor: str | None
    start: int
    """Values counted before it began (its size, for an anchor, is the difference)."""
    index: int = 0
    key: str | None = None
    """The current key (mappings); None while the next node is a key."""


def _short_key(value: str) -> str:
    return value if len(value) <= _KEY_SHOWN_CHARS else value[:_KEY_SHOWN_CHARS] + "…"


def _check_events(text: str, source: str | None) -> dict[tuple[int, int], str]:
    """Depth, size and text checks in one pass over the parser's events; returns the key path
    of every mapping by its start (line, column), for the duplicate-key message."""
    levels: list[_Level] = []
    anchors: dict[str, int] = {}
    mapping_paths: dict[tuple[int, int], str] = {}
    values = 0
    for event in _events(text, levels, source):
        if not isinstance(event, yaml.NodeEvent):
            if isinstance(event, yaml.CollectionEndEvent):
                level = levels.pop()
                if level.anchor:
                    anchors[level.anchor] = values - level.start + 1
                _node_done(levels, "?" if level.is_key else None)
            continue
        parent = levels[-1] if levels else None
        is_key = bool(parent and parent.is_map and parent.key is None)
        path = _next_path(levels)
        where = path or "(top)"
        if isinstance(event, yaml.AliasEvent):
            values += anchors.get(event.anchor or "", 1)
        else:
            values += 1
        if values > MAX_VALUES:
            raise YamlInputError(
                Problem(
                    where,
                    f"the document holds more than {MAX_VALUES:,} values (an alias counts as "
                    "everything it repeats)",
                    "keep long lists (data, shards, sweeps) in a file the job reads",
                    source,
                )
            )
        if isinstance(event, yaml.ScalarEvent):
            match = _SURROGATE.search(event.value)
            if match:  # PyYAML's own loader decodes "\ud800"; libyaml refuses it
                raise YamlInputError(
                    Problem(
                        where,
                        _surrogate_message(match.group()),
                        "write the character itself, or a \\U escape of a real code point",
                        source,
                    )
                )
            if event.implicit[0] and _too_big_integer(event.value):
                raise YamlInputError(
                    Problem(
                        where,
                        f"{_short_key(event.value)} is beyond what a 64-bit integer holds",
                        "write the number the field needs; no field here takes one this large",
                        source,
                    )
                )
            if event.anchor:
                anchors[event.anchor] = 1
            _node_done(levels, _short_key(event.value) if is_key else None)
        elif isinstance(event, yaml.CollectionStartEvent):
            is_map = isinstance(event, yaml.MappingStartEvent)
            levels.append(_Level(path, is_map, is_key, event.anchor, values))
            if len(levels) > MAX_DEPTH:
                mark = event.start_mark
                raise YamlInputError(
                    Problem(
                        where,
                        f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1}, "
                        f"column {mark.column + 1})",
                        "a job or stack file nests a few levels: flatten it",
                        source,
                    )
                )
            if is_map:
                mark = event.start_mark
                mapping_paths[(mark.line, mark.column)] = path
        else:  # an alias: complete as it stands
            _node_done(levels, "*" if is_key else None)
    return mapping_paths


def _next_path(levels: list[_Level]) -> str:
    """The key path of the node the parser reads next."""
    if not levels:
        return ""
    parent = levels[-1]
    if not parent.is_map:
        return join_path(parent.path, parent.index)
    return parent.path if parent.key is None else join_path(parent.path, parent.key)


def _events(text: str, levels: list[_Level], source: str | None) -> Iterator[yaml.Event]:
    """The parser's events. The libyaml in PyYAML 6.0.4 refuses nesting past 1,000 levels
    itself, in its scanner, which reads a flow collection ahead before the parser emits the
    levels our own limit counts: that refusal gets our message and the place reached."""
    try:
        yield from yaml.parse(text, Loader=SAFE_LOADER)
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" not in str(exc.problem):
            raise
        mark = exc.problem_mark
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise YamlInputError(
            Problem(
                _next_path(levels) or "(top)",
                f"nested more than {MAX_DEPTH} levels deep{at}",
                "a job or stack file nests a few levels: flatten it",
                source,
            )
        ) from None


def _too_big_integer(text: str) -> bool:
    """A plain scalar YAML reads as an integer outside -2**63 .. 2**64-1. Python would build
    it (slowly, and refuse to print it past 4,300 digits); no field here takes it."""
    if _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) != _INT_TAG:
        return False
    if len(text.replace("_", "")) > _INT_MAX_CHARS:
        return True
    value = _CONSTRUCTOR.construct_yaml_int(yaml.ScalarNode(_INT_TAG, text))
    return not -(2**63) <= value <= 2**64 - 1


def _node_done(levels: list[_Level], key: str | None) -> None:
    """A node ended inside ``levels[-1]``; ``key`` is its text when it was a mapping key."""
    if not levels:
        return
    parent = levels[-1]
    if not parent.is_map:
        parent.index += 1
    elif key is not None and parent.key is None:
        parent.key = key
    else:
        parent.key = None


class _Loader(SAFE_LOADER):
    """SafeLoader that refuses a key repeated in one mapping: PyYAML keeps the last silently,
    so ``env: {A: 1, A: 2}`` or a second ``chief:`` would vanish without a word."""

    mapping_paths: dict[tuple[int, int], str] = {}
    source: str | None = None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` then overriding its keys is the point of merging
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                at = self.mapping_paths.get((node.start_mark.line, node.start_mark.column), "")
                lines = f"line {line}" if first == line else f"lines {first} and {line}"
                raise YamlInputError(
                    Problem(
                        join_path(at, _short_key(key) if isinstance(key, str) else str(key)),
                        f"key written twice ({lines}); YAML would keep only the last one "
                        "without a word",
                        "keep one of them",
                        self.source,
                    )
                )
        return super().construct_mapping(node, deep)
