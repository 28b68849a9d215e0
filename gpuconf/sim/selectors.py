"""Label and field selectors, parsed and matched the way the real API server does.

Label selectors follow ``k8s.io/apimachinery/pkg/labels`` (``=``, ``==``, ``!=``, ``in``, ``notin``,
``key``, ``!key``, ``>``, ``<``); field selectors follow ``pkg/fields`` (``=``, ``==``, ``!=``, with
``\\,`` ``\\=`` ``\\\\`` escapes). Which field labels a resource accepts is the resource table's business
(:mod:`gpuconf.sim.resources`); this module only parses, checks against a given whitelist and matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "field_value",
    "label_selector_from_object",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector the real server would reject with 400 BadRequest; the message is the server's."""


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector: ``key op values``."""

    key: str
    op: str  # one of: = != in notin exists !exists > <
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            # The real selector matches objects that lack the key for != and notin.
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if not present:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == ">" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


_SPECIAL = frozenset(" \t,()=!<>")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t":
            i += 1
        elif text.startswith(("!=", "=="), i):
            out.append(text[i:i + 2])
            i += 2
        elif ch in "=!(),<>":
            out.append(ch)
            i += 1
        else:
            start = i
            while i < len(text) and text[i] not in _SPECIAL:
                i += 1
            out.append(text[start:i])
    return out


def _is_word(token: str | None) -> bool:
    return token is not None and token[0] not in _SPECIAL


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, found: str | None, expected: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: found '{found or ''}', expected: {expected}")

    def word(self, expected: str) -> str:
        token = self.take()
        if not _is_word(token):
            raise self.fail(token, expected)
        assert token is not None
        return token

    def value(self) -> str:
        # An empty value is legal ("a=" selects objects whose label a is the empty string).
        return self.word("value") if _is_word(self.peek()) else ""

    def values(self) -> tuple[str, ...]:
        if self.take() != "(":
            raise self.fail(self.tokens[self.pos - 1] if self.pos <= len(self.tokens) else None, "'('")
        out = [self.value()]
        while self.peek() == ",":
            self.take()
            out.append(self.value())
        closing = self.take()
        if closing != ")":
            raise self.fail(closing, "')'")
        return tuple(out)

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return Requirement(self.word("identifier after '!'"), "!exists")
        key = self.word("identifier")
        op = self.peek()
        if op is None or op == ",":
            return Requirement(key, "exists")
        self.take()
        if op in ("=", "=="):
            return Requirement(key, "=", (self.value(),))
        if op == "!=":
            return Requirement(key, "!=", (self.value(),))
        if op in ("in", "notin"):
            return Requirement(key, op, self.values())
        if op in (">", "<"):
            bound = self.word("integer")
            try:
                int(bound)
            except ValueError:
                raise SelectorError(f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an "
                                    f"integer: {bound!r}") from None
            return Requirement(key, op, (bound,))
        raise self.fail(op, "'=', '!=', '==', 'in', notin'")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter; an empty or missing one selects everything."""
    if not text or not text.strip():
        return LabelSelector()
    parser = _Parser(text)
    requirements = [parser.requirement()]
    while parser.peek() is not None:
        sep = parser.take()
        if sep != ",":
            raise parser.fail(sep, "','")
        requirements.append(parser.requirement())
    return LabelSelector(tuple(requirements))


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` object (matchLabels + matchExpressions) as a LabelSelector.

    Controllers built on the store (a Job controller matching its pods) use this; an absent selector
    selects nothing, as in ``metav1.LabelSelectorAsSelector``.
    """
    if selector is None:
        return LabelSelector((Requirement("", "in", ()),))
    reqs = [Requirement(k, "=", (str(v),)) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or ():
        op = ops.get(str(expr.get("operator")))
        if op is None:
            raise SelectorError(f"{expr.get('operator')!r} is not a valid label selector operator")
        reqs.append(Requirement(str(expr["key"]), op, tuple(str(v) for v in expr.get("values") or ())))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str

    def matches(self, actual: str) -> bool:
        return (actual == self.value) == (self.op == "=")


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(r.field for r in self.requirements)

    def check_supported(self, supported: Sequence[str] | Mapping[str, Any]) -> None:
        """Reject a field the resource does not index, as the real server does (400 BadRequest)."""
        for req in self.requirements:
            if req.field not in supported:
                raise SelectorError(f"field label not supported: {req.field}")

    def matches(self, values: Mapping[str, str]) -> bool:
        return all(r.matches(values.get(r.field, "")) for r in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    escaped = False
    for i, ch in enumerate(term):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif term.startswith("!=", i):
            return i, "!="
        elif term.startswith("==", i):
            return i, "=="
        elif ch == "=":
            return i, "="
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` query parameter; an empty or missing one selects everything."""
    if not text or not text.strip():
        return FieldSelector()
    reqs = []
    for term in _split_unescaped(text, ","):
        found = _find_operator(term)
        if found is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        index, op = found
        field = term[:index].strip()
        value = _unescape(term[index + len(op):].strip())
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
    return FieldSelector(tuple(reqs))


def field_value(obj: Mapping[str, Any], path: Sequence[str]) -> str:
    """The string a field selector compares against: "" when absent, Go's formatting for bools."""
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping):
            return ""
        node = node.get(key)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)
