"""A config file to a validated ``TrainConfig``: the file read (`trainer.config.safe_yaml`),
relative paths resolved against the file's directory, ``--set`` and a tuning trial's overrides
applied, the result validated (`trainer.config.schema`), local data checked to be regular files.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from trainer.config.safe_yaml import FILE_KINDS, MAX_DEPTH, load_yaml_text, read_yaml
from trainer.config.schema import ConfigError, TrainConfig, parse_config

# Keys holding file locations, resolved against the config file's directory when relative.
PATH_KEYS = (
    ("data", "path"),
    ("data", "eval_path"),
    ("model", "name_or_path"),
    ("model", "tokenizer"),
    ("output_dir",),
)


def load_config(
    path: str | Path,
    overrides: list[str] | tuple[str, ...] = (),
    trial_overrides: list[str] | tuple[str, ...] = (),
) -> TrainConfig:
    """Read a YAML config, apply `key.path=value` overrides (`--set`, then a tuning trial's
    parameters: the same rules, only the messages name them as trial arguments), validate."""
    path = Path(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        _resolve_paths(raw, path.resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    for item in overrides:
        _apply_override(raw, item)
    for item in trial_overrides:
        _apply_override(raw, item, TRIAL_ARGUMENT)
    cfg = parse_config(raw, source=str(path))
    _check_local_paths(cfg, str(path))
    return cfg


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for keys in PATH_KEYS:
        parent = raw
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get(keys[-1]), str):
            parent[keys[-1]] = _resolve(parent[keys[-1]], base, ".".join(keys))


def _resolve(value: str, base: Path, key: str) -> str:
    if "\x00" in value:  # os calls raise ValueError on it
        raise ConfigError(f"{key}: {value!r:.60} holds a NUL character; no file name can")
    if "://" in value or Path(value).is_absolute():
        return value
    return str((base / value).resolve())


TRIAL_ARGUMENT = "trial argument"
"""How messages name an override that came as a tuning trial's `--KEY=VALUE` argument."""


def _apply_override(raw: dict[str, Any], item: str, flag: str = "--set") -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(
            f"{flag} {item!r}: expected KEY.PATH=VALUE, e.g. --set data.path=gs://b/x.jsonl"
        )
    parts = key.split(".")
    if len(parts) > MAX_DEPTH:
        raise ConfigError(
            f"{flag} {item[:60]!r}: the key path is more than {MAX_DEPTH} levels deep"
        )
    target = raw
    for part in parts[:-1]:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{flag} {item!r}: `{part}` is not a mapping in the config")
        target = child
    try:
        value = load_yaml_text(text, f"{flag} {key}") if text else ""
    except ConfigError as exc:
        if "invalid YAML" not in str(exc):
            raise
        problem = str(exc).split("invalid YAML: ", 1)[1]
        raise ConfigError(
            f"{flag} {item!r}: the value is not valid YAML ({problem}); quote text values, "
            "e.g. --set 'data.path=\"x[1].jsonl\"'"
        ) from None
    if tuple(parts) in PATH_KEYS and isinstance(value, str):
        value = _resolve(value, Path.cwd(), key)
    target[parts[-1]] = value


def _check_local_paths(cfg: TrainConfig, source: str) -> None:
    """Local data must be regular files: a folder would end in IsADirectoryError deep inside the
    data reader, a device such as /dev/zero in a MemoryError, and a FIFO would block the
    reader forever. Only `stat` is called here: opening a FIFO would block this check too."""
    for key, path in (("data.path", cfg.data.path), ("data.eval_path", cfg.data.eval_path)):
        if path is None:
            continue
        if path.endswith("/"):
            raise ConfigError(
                f"{source}: {key}: {path} is a folder; give one JSONL or Parquet file"
            )
        if "://" not in path:
            _check_regular_file(source, key, path)
    output = Path(cfg.output_dir)
    if "://" not in cfg.output_dir and output.exists() and not output.is_dir():
        raise ConfigError(f"{source}: output_dir: {cfg.output_dir} is a file; give a directory")


def _check_regular_file(source: str, key: str, path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(f"{source}: {key}: {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{source}: {key}: cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{source}: {key}: {path} is a folder; give one JSONL or Parquet file")
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{source}: {key}: {path} is {FILE_KINDS.get(stat.S_IFMT(mode), 'not a file')}, "
            "not a regular file; give one JSONL or Parquet file"
        )
