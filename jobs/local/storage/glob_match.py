"""GCS's ``matchGlob`` (objects.list) compiled to a Thompson automaton: matching a name costs
at most (name length) x (pattern size) steps, whatever the pattern. Brace lists are
alternatives inside the automaton, never expanded (``{a,b}`` written 24 times is 2**24 strings
expanded, 24 small forks here), and there is no backtracking for ``*a*a*a...`` to explode in.

The syntax (cloud.google.com/storage/docs/json_api/v1/objects/list, ``matchGlob``): ``*``
any run of characters without ``/``; ``**`` any run, ``/`` included, and ``**/`` zero or more
whole directory levels; ``?`` one character other than ``/``; ``[abc]``, ``[a-z]`` and
``[!abc]`` one character of (or not of) a set; ``{x,y}`` any of the comma-separated
alternatives; ``\\`` makes the next character literal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_GLOB_CHARS = 256
"""The longest pattern served. Matching one name of 1,024 characters then costs at most about
a quarter million steps (a second of CPU), whatever the pattern."""
MAX_BRACE_DEPTH = 10
MAX_CACHED_STEPS = 50_000
"""Transitions remembered per pattern (state set, character) -> state set; past this each
step is computed again, so memory stays bounded while the answer does not change."""

# Instructions: ("char", test), ("split", a, b), ("jmp", a), ("match",).
# Tests: ("lit", c), ("any",), ("not_slash",), ("set", chars, ranges, negated).
Instruction = tuple


class GlobError(ValueError):
    """A pattern that cannot be compiled; the message says where."""


def _accepts(test: tuple, ch: str) -> bool:
    kind = test[0]
    if kind == "lit":
        return ch == test[1]
    if kind == "not_slash":
        return ch != "/"
    if kind == "any":
        return True
    _, chars, ranges, negated = test
    inside = ch in chars or any(lo <= ch <= hi for lo, hi in ranges)
    return inside != negated


class _Compiler:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.prog: list[Instruction] = []
        self.depth = 0

    def emit(self, instruction: Instruction | None) -> int:
        self.prog.append(instruction or ("jmp", -1))
        return len(self.prog) - 1

    def compile(self) -> list[Instruction]:
        self.sequence(in_braces=False)
        self.emit(("match",))
        return self.prog

    def sequence(self, in_braces: bool) -> None:
        pattern = self.pattern
        while self.pos < len(pattern):
            ch = pattern[self.pos]
            if in_braces and ch in ",}":
                return
            if ch == "*":
                self.stars()
            elif ch == "?":
                self.pos += 1
                self.emit(("char", ("not_slash",)))
            elif ch == "[":
                self.char_set()
            elif ch == "{":
                self.braces()
            elif ch == "\\":
                if self.pos + 1 >= len(pattern):
                    raise GlobError("matchGlob ends with a lone '\\'; write '\\\\' for a backslash")
                self.emit(("char", ("lit", pattern[self.pos + 1])))
                self.pos += 2
            else:
                self.emit(("char", ("lit", ch)))
                self.pos += 1

    def stars(self) -> None:
        if not self.pattern.startswith("**", self.pos):
            self.pos += 1
            self.loop(("not_slash",))
            return
        self.pos += 2
        if self.pattern.startswith("/", self.pos):  # '**/': zero or more whole levels
            self.pos += 1
            fork = self.emit(None)
            self.loop(("any",))
            self.emit(("char", ("lit", "/")))
            self.prog[fork] = ("split", fork + 1, len(self.prog))
        else:
            self.loop(("any",))

    def loop(self, test: tuple) -> None:
        fork = self.emit(None)
        self.emit(("char", test))
        self.emit(("jmp", fork))
        self.prog[fork] = ("split", fork + 1, len(self.prog))

    def char_set(self) -> None:
        start = self.pos
        self.pos += 1
        negated = self.pattern.startswith(("!", "^"), self.pos)
        self.pos += int(negated)
        chars: set[str] = set()
        ranges: list[tuple[str, str]] = []
        first = True
        while self.pos < len(self.pattern) and (first or self.pattern[self.pos] != "]"):
            ch = self.pattern[self.pos]
            after = self.pattern[self.pos + 2 : self.pos + 3]
            if self.pattern.startswith("-", self.pos + 1) and after not in ("", "]"):
                if after < ch:
                    raise GlobError(f"matchGlob range {ch}-{after} at {self.pos} runs backwards")
                ranges.append((ch, after))
                self.pos += 3
            else:
                chars.add(ch)
                self.pos += 1
            first = False
        if self.pos >= len(self.pattern):
            raise GlobError(f"matchGlob '[' at {start} has no closing ']'")
        self.pos += 1
        self.emit(("char", ("set", frozenset(chars), tuple(ranges), negated)))

    def braces(self) -> None:
        start = self.pos
        self.depth += 1
        if self.depth > MAX_BRACE_DEPTH:
            raise GlobError(f"matchGlob nests '{{' more than {MAX_BRACE_DEPTH} deep")
        self.pos += 1
        exits: list[int] = []
        while True:
            fork = self.emit(None)
            self.sequence(in_braces=True)
            if self.pos >= len(self.pattern):
                raise GlobError(f"matchGlob '{{' at {start} has no closing '}}'")
            closing = self.pattern[self.pos] == "}"
            self.pos += 1
            if closing:
                self.prog[fork] = ("jmp", fork + 1)
                break
            exits.append(self.emit(None))
            self.prog[fork] = ("split", fork + 1, len(self.prog))
        for exit_ in exits:
            self.prog[exit_] = ("jmp", len(self.prog))
        self.depth -= 1


@dataclass
class Glob:
    """A compiled pattern. ``steps`` counts the work done so far (one per state per
    character computed), for callers that bound the work of one request."""

    pattern: str
    prog: list[Instruction]
    steps: int = 0
    _closures: dict[int, frozenset[int]] = field(default_factory=dict)
    _cache: dict[tuple[frozenset[int], str], frozenset[int]] = field(default_factory=dict)

    def _closure(self, pc: int) -> frozenset[int]:
        """The 'char' and 'match' instructions reachable from ``pc`` without a character."""
        known = self._closures.get(pc)
        if known is not None:
            return known
        seen: set[int] = set()
        stack = [pc]
        while stack:
            at = stack.pop()
            if at in seen:
                continue
            seen.add(at)
            op = self.prog[at]
            if op[0] == "split":
                stack += [op[1], op[2]]
            elif op[0] == "jmp":
                stack.append(op[1])
        result = frozenset(at for at in seen if self.prog[at][0] in ("char", "match"))
        self.steps += len(seen)
        self._closures[pc] = result
        return result

    def _step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        key = (states, ch)
        known = self._cache.get(key)
        if known is not None:
            self.steps += 1
            return known
        following: set[int] = set()
        for pc in states:
            op = self.prog[pc]
            if op[0] == "char" and _accepts(op[1], ch):
                following |= self._closure(pc + 1)
        self.steps += len(states) + 1
        result = frozenset(following)
        if len(self._cache) < MAX_CACHED_STEPS:
            self._cache[key] = result
        return result

    def matches(self, name: str) -> bool:
        states = self._closure(0)
        for ch in name:
            states = self._step(states, ch)
            if not states:
                return False
        return any(self.prog[pc][0] == "match" for pc in states)


def compile_glob(pattern: str) -> Glob:
    """The pattern compiled; GlobError names what is wrong with it."""
    if not pattern:
        raise GlobError("matchGlob is empty; leave it out to list every object")
    if len(pattern) > MAX_GLOB_CHARS:
        raise GlobError(
            f"matchGlob is {len(pattern)} characters long; the local GCS serves patterns of at "
            f"most {MAX_GLOB_CHARS}"
        )
    return Glob(pattern, _Compiler(pattern).compile())
