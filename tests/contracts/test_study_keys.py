"""`jobs.spec.study.TRAINER_KEYS` is the platform's copy of the trainer's config keys (jobs never
import
the trainer): `vtx validate` refuses a study parameter the trainer would not take. This pins the
copy to `trainer.config.schema.TrainConfig`'s leaves and the kind of value each holds, so either
side drifting fails here first."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel

from jobs.spec.study import FREE_FORM_PREFIXES, TRAINER_KEYS
from trainer.config.schema import TrainConfig

NUMBERS = {int: "int", float: "float", bool: "bool", str: "str"}


def _kind(annotation: Any) -> str:
    """int, float, bool, str (a Literal of strings too), or other; Optional is looked through."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if origin is Literal and all(isinstance(a, str) for a in args):
        return "str"
    return NUMBERS.get(annotation, "other")


def _model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *typing.get_args(annotation)]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        if any(f"{key}." == p for p in FREE_FORM_PREFIXES):
            continue  # the model's own configuration: any key goes
        sub = _model(field.annotation)
        if sub is not None:
            yield from _leaves(sub, f"{key}.")
        else:
            yield key, _kind(field.annotation)


def test_the_study_key_copy_matches_the_trainers_config() -> None:
    assert dict(_leaves(TrainConfig)) == TRAINER_KEYS


def test_the_free_form_prefixes_are_mappings_in_the_trainers_config() -> None:
    for prefix in FREE_FORM_PREFIXES:
        *parents, name = prefix.rstrip(".").split(".")
        model: type[BaseModel] = TrainConfig
        for part in parents:
            sub = _model(model.model_fields[part].annotation)
            assert sub is not None
            model = sub
        annotation = model.model_fields[name].annotation
        assert any(typing.get_origin(a) is dict for a in typing.get_args(annotation))
