"""Reading a YAML file safely: the rules of jobs/core/safe_yaml.py (which job templates and stack
configs go through), in a smaller copy: the trainer ships alone in its container and imports
nothing of ours. tests/contracts/test_trainer_copies.py pins the two to the same answers. PyYAML
alone raises RecursionError on deep nesting, UnicodeDecodeError on a stray byte, ValueError on a
5,000-digit integer, and keeps the last of two equal keys without a word."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from trainer.config.schema import ConfigError

MAX_BYTES = 256 * 1024
"""A training config is 1-2 KB."""


MAX_DEPTH = 32
"""Nesting levels of mappings and lists; a config with a transformers `config:` needs 4-5."""


MAX_VALUES = 20_000
"""Scalars, mappings and lists, an alias counting as everything it repeats."""


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_INT_TAG = "tag:yaml.org,2002:int"


def read_yaml(path: Path) -> Any:
    """The document in `path`, or ConfigError naming the file and the place."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # opening a FIFO with no writer would block
            kind = FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise ConfigError(f"{path}: is {kind}; --config takes a regular YAML file")
        if info.st_size > MAX_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_BYTES:,} bytes; a config is a few KB")
        with path.open("rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES:,} bytes; a config is a few KB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}: line {line}: not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}; save the file as UTF-8"
        ) from None
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, source: str) -> Any:
    """One YAML document within the limits above; a key written twice is an error."""
    bad = re.search("[\udc80-\udcff]", text)  # how Python keeps non-UTF-8 bytes of argv
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        byte = ord(bad.group()) - 0xDC00
        raise ConfigError(f"{source}: line {line}: not UTF-8 text: byte 0x{byte:02x}")
    try:
        loader = _UniqueKeyLoader(text)
        loader.source, loader.mapping_paths = source, _check_events(text, source)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}: {where}invalid YAML: {reason}") from None


class _Level:
    """An open mapping or list during the event pass."""

    def __init__(self, path: str, is_map: bool, start: int, anchor: str | None) -> None:
        self.path, self.is_map, self.start, self.anchor = path, is_map, start, anchor
        self.key: str | int | None = None if is_map else 0
        """Mappings: the current key (None while the next node is a key); lists: the index."""


def _check_events(text: str, source: str) -> dict[tuple[int, int], str]:
    """Depth, size and integer range in one iterative pass, each refused with its key path;
    returns each mapping's key path by its start (line, column), for duplicate keys."""
    levels: list[_Level] = []
    anchors: dict[str, int] = {}
    mapping_paths: dict[tuple[int, int], str] = {}
    values = 0
    for event in _events(text, levels, source):
        if isinstance(event, yaml.CollectionEndEvent):
            level = levels.pop()
            if level.anchor:
                anchors[level.anchor] = values - level.start + 1
            _advance(levels, "?")
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        path = _next_path(levels)
        values += anchors.get(event.anchor or "", 1) if isinstance(event, yaml.AliasEvent) else 1
        if values > MAX_VALUES:
            raise ConfigError(
                f"{source}: {path or '(top)'}: the document holds more than {MAX_VALUES:,} "
                "values (an alias counts as everything it repeats)"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            is_map = isinstance(event, yaml.MappingStartEvent)
            levels.append(_Level(path, is_map, values, event.anchor))
            if len(levels) > MAX_DEPTH:
                raise ConfigError(f"{source}: {path}: nested more than {MAX_DEPTH} levels deep")
            if levels[-1].is_map:
                mapping_paths[(event.start_mark.line, event.start_mark.column)] = path
            continue
        if isinstance(event, yaml.ScalarEvent):
            if event.implicit[0] and _beyond_64_bits(event.value):
                where = f"{path}: " if path else ""
                raise ConfigError(
                    f"{source}: {where}{event.value[:40]} is beyond what a 64-bit integer holds"
                )
            if event.anchor:
                anchors[event.anchor] = 1
        _advance(levels, event.value[:40] if isinstance(event, yaml.ScalarEvent) else "*")
    return mapping_paths


def _next_path(levels: list[_Level]) -> str:
    """The key path of the node the parser reads next."""
    if not levels:
        return ""
    parent = levels[-1]
    is_key = parent.is_map and parent.key is None
    return parent.path if is_key else _join(parent.path, parent.key)


def _events(text: str, levels: list[_Level], source: str) -> Iterator[yaml.Event]:
    """The parser's events. The libyaml in PyYAML 6.0.4 refuses nesting past 1,000 levels
    itself, in its scanner, which reads a flow collection ahead before the parser emits the
    levels our own limit counts: that refusal gets our message and the place reached."""
    try:
        yield from yaml.parse(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" not in str(exc.problem):
            raise
        path = _next_path(levels) or "(top)"
        raise ConfigError(f"{source}: {path}: nested more than {MAX_DEPTH} levels deep") from None


def _advance(levels: list[_Level], key: str) -> None:
    """A node ended inside ``levels[-1]``; ``key`` is its text in case it was a mapping key."""
    if not levels:
        return
    level = levels[-1]
    if not level.is_map:
        level.key = int(level.key or 0) + 1
    else:
        level.key = key if level.key is None else None


def _beyond_64_bits(text: str) -> bool:
    """A plain scalar YAML reads as an integer outside -2**63 .. 2**64-1."""
    if yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False)) != _INT_TAG:
        return False
    if len(text.replace("_", "")) > 67:  # "-0b" and 64 binary digits
        return True
    value = yaml.constructor.SafeConstructor().construct_yaml_int(yaml.ScalarNode(_INT_TAG, text))
    return not -(2**63) <= value <= 2**64 - 1


def _join(path: str, key: str | int | None) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class _UniqueKeyLoader(_Loader):
    source = ""
    mapping_paths: dict[tuple[int, int], str] = {}

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
                raise ConfigError(
                    f"{self.source}: {_join(at, str(key))}: key written twice (lines {first} "
                    f"and {line}); YAML would keep only the last one without a word"
                )
        return super().construct_mapping(node, deep)


FILE_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}
