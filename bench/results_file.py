"""bench/RESULTS.md as sections, so `python -m bench --only NAME` replaces NAME's section and
keeps every other one (a full run takes tens of minutes; one benchmark rerun should not erase
the others' figures)."""

from __future__ import annotations

import re

RUN_CONDITIONS = "Run conditions"
_TITLE = re.compile(r"^## (.+)$", re.MULTILINE)


def split(text: str) -> tuple[str, dict[str, str]]:
    """The text before the first `## ` title, and each section's text by title, in order."""
    starts = list(_TITLE.finditer(text))
    head = text[: starts[0].start()] if starts else text
    sections: dict[str, str] = {}
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        sections[match.group(1).strip()] = text[match.start() : end].rstrip("\n") + "\n"
    return head, sections


def title_of(section_text: str) -> str:
    match = _TITLE.search(section_text)
    if match is None:
        raise ValueError("a benchmark section must start with a '## ' title")
    return match.group(1).strip()


def merged(existing: str, rerun: list[str], note: str) -> str:
    """`existing` with each rerun section replacing the one of the same title (a new one goes
    before the run conditions) and `note` added to the header, saying which figures are newer."""
    head, sections = split(existing)
    for text in rerun:
        title = title_of(text)
        if title not in sections:
            sections = _insert_before(sections, RUN_CONDITIONS, title, text)
        sections[title] = text
    return head.rstrip("\n") + "\n" + note + "\n\n" + "\n".join(sections.values())


def _insert_before(sections: dict[str, str], anchor: str, title: str, text: str) -> dict[str, str]:
    if anchor not in sections:
        return {**sections, title: text}
    out: dict[str, str] = {}
    for key, value in sections.items():
        if key == anchor:
            out[title] = text
        out[key] = value
    return out
