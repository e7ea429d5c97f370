"""Every string a document holds (values and mapping keys), with its path and what names it, and
the problems of those shaped like a credential (`jobs.core.credentials`): a job's env, args,
command, labels, image, study values and every other field are judged alike, wherever a template
or a gcloud document puts them. The problems name the place and the shape, never the value."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from jobs.core.credentials import secret_hint, shape_of
from jobs.core.problems import Problem, join_path


@dataclass(frozen=True)
class DocString:
    value: str
    path: str
    """Where the string is: the path of a value; for a mapping key, the mapping's path."""
    context: str
    """What names it: its key, the flag before it in a list, an env variable's name."""
    is_key: bool = False


def document_strings(doc: Any, path: str = "", context: str = "") -> Iterator[DocString]:
    """Every string in ``doc``, depth first. A ``{name, value}`` mapping (the REST form of an
    env variable) gives its value at the mapping's own path, named by ``name``; a list item is
    named by the item before it too (``[--revision, <sha>]``)."""
    if isinstance(doc, str):
        yield DocString(doc, path or "(top)", context)
    elif isinstance(doc, dict):
        name = doc.get("name")
        if (
            isinstance(name, str)
            and isinstance(doc.get("value"), str)
            and set(doc)
            <= {
                "name",
                "value",
            }
        ):
            yield DocString(name, join_path(path, "name"), "name")
            yield DocString(doc["value"], path, name)
            return
        for key, value in doc.items():
            if isinstance(key, str):
                yield DocString(key, path or "(top)", context, is_key=True)
            yield from document_strings(value, join_path(path, str(key)), str(key))
    elif isinstance(doc, list):
        before = ""
        for i, item in enumerate(doc):
            yield from document_strings(item, join_path(path, i), f"{context} {before}")
            before = item if isinstance(item, str) else ""


def shaped_string_problems(
    strings: Iterable[DocString], skip: Callable[[str], bool] = lambda _path: False
) -> Iterator[Problem]:
    """A problem for each string shaped like a credential, except at paths ``skip`` owns (judged
    by a more specific rule)."""
    for text in strings:
        if skip(text.path):
            continue
        shape = shape_of(text.value, "" if text.is_key else text.context)
        if shape is None:
            continue
        what = f"a key under {text.path}" if text.is_key else "this value"
        yield Problem(
            text.path,
            f"{what} has the shape of {shape.name}; a job carries credentials only as "
            "Secret Manager names",
            secret_hint(shape),
        )
