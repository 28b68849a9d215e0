"""DRA's CEL environment, on the cel-python library: ``device.*`` plus Kubernetes' quantity and
semver extensions, so DeviceClass and ResourceClaim selectors evaluate as the kube-scheduler
evaluates them (KEP-4381; k8s.io/dynamic-resource-allocation/cel).

A device is presented as::

    device.driver                                   string
    device.attributes["<domain>"].<name>            int | bool | string | semver
    device.capacity["<domain>"].<name>              quantity

An attribute published without a domain belongs to the driver's domain. A missing attribute is a
CEL runtime error ("no such key"), as on a real cluster; selectors guard optional ones with has().
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache, total_ordering
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.celparser import CELParseError

__all__ = ["CelError", "Quantity", "Semver", "compile_selector", "compile_error", "device_activation",
           "parse_quantity"]


class CelError(ValueError):
    """A selector that does not compile, or a runtime error while evaluating it."""


# --- quantity --------------------------------------------------------------------------------

_SUFFIX = {
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


@total_ordering
@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource quantity ("80Gi", "500m", "1e3"), compared by value."""

    value: Decimal
    text: str

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def parse_quantity(text: str) -> Quantity:
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise CelError("quantities must match the regular expression "
                       f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number) * (Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""])
    except InvalidOperation as exc:
        raise CelError(f"invalid quantity {text!r}") from exc
    return Quantity(value, text)


# --- semver ----------------------------------------------------------------------------------

_SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                     r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$")


@dataclass(frozen=True)
class Semver:
    """A semantic version (DRA ``version`` attributes: driverVersion 560.35.3, cudaDriverVersion 12.6.0)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...]
    text: str

    def key(self) -> tuple[Any, ...]:
        # A release sorts after its pre-releases; numeric identifiers sort numerically, before alphanumerics.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)


def parse_semver(text: str) -> Semver:
    match = _SEMVER.match(text) if isinstance(text, str) else None
    if not match:
        raise CelError(f"invalid semver: {text!r}")
    major, minor, patch, pre, _build = match.groups()
    return Semver(int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else (), text)


# --- the functions selectors may call ----------------------------------------------------------


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return (a.key() > b.key()) - (a.key() < b.key())
    raise CelError(f"no matching overload for compareTo({type(a).__name__}, {type(b).__name__})")


def _fn_quantity(text: Any) -> Quantity:
    return parse_quantity(str(text))


def _fn_semver(text: Any) -> Semver:
    return parse_semver(str(text))


def _is_quantity(text: Any) -> ct.BoolType:
    try:
        parse_quantity(str(text))
    except CelError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _is_semver(text: Any) -> ct.BoolType:
    try:
        parse_semver(str(text))
    except CelError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _as_integer(q: Quantity) -> ct.IntType:
    if q.value != q.value.to_integral_value():
        raise CelError(f"cannot convert value to integer: {q.text}")
    return ct.IntType(int(q.value))


FUNCTIONS: dict[str, Any] = {
    "quantity": _fn_quantity,
    "isQuantity": _is_quantity,
    "semver": _fn_semver,
    "isSemver": _is_semver,
    "compareTo": lambda a, b: ct.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: ct.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: ct.BoolType(_compare(a, b) < 0),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: ct.DoubleType(float(q.value)),
    "isInteger": lambda q: ct.BoolType(q.value == q.value.to_integral_value()),
    "sign": lambda q: ct.IntType((q.value > 0) - (q.value < 0)),
    "add": lambda a, b: Quantity(a.value + (b.value if isinstance(b, Quantity) else Decimal(int(b))), "sum"),
    "sub": lambda a, b: Quantity(a.value - (b.value if isinstance(b, Quantity) else Decimal(int(b))), "difference"),
    "major": lambda v: ct.IntType(v.major),
    "minor": lambda v: ct.IntType(v.minor),
    "patch": lambda v: ct.IntType(v.patch),
}

@lru_cache(maxsize=1)
def _env() -> celpy.Environment:
    """celpy's environment, made at the first expression: making it builds its LALR parser (~0.4 s),
    which a simulated cluster without DRA never needs."""
    return celpy.Environment()


class Selector:
    """A compiled selector expression; ``matches(device)`` is True, False or raises CelError."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self._program = _env().program(_env().compile(expression), functions=FUNCTIONS)
        except Exception as exc:  # cel-python raises its own parse error types
            raise CelError(f"compilation failed: {exc}") from exc

    def matches(self, activation: dict[str, Any]) -> bool:
        try:
            result = self._program.evaluate(activation)
        except Exception as exc:
            raise CelError(f"CEL runtime error: {_runtime_message(exc)}") from exc
        if isinstance(result, Exception):
            raise CelError(f"CEL runtime error: {_runtime_message(result)}")
        if not isinstance(result, (bool, ct.BoolType)):
            raise CelError(f"CEL result must be bool, got {type(result).__name__}")
        return bool(result)


def _runtime_message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    text = str(args[0]) if args else str(exc)
    match = re.search(r"no such member in mapping: '?([^']*)'?", text)
    return f"no such key: {match.group(1)}" if match else text


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    return Selector(expression)


# --- compilation, as kube-apiserver compiles a selector when the object is created -----------------

#: The fields of the ``device`` variable (k8s.io/dynamic-resource-allocation/cel, v1.36: a selector
#: naming another, ``device.drivr``, is refused with "undefined field 'drivr'").
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})

#: Global functions a selector may call: CEL's standard ones, its macros, and Kubernetes'
#: libraries (quantity, semver, URLs, IPs and CIDRs). Methods (``x.startsWith(...)``) are not checked.
GLOBAL_FUNCTIONS = frozenset({
    "has", "size", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn", "duration", "timestamp",
    "matches", "quantity", "isQuantity", "semver", "isSemver", "url", "isURL", "ip", "isIP", "cidr", "isCIDR",
})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})

#: cel-go's (ANTLR's) names for the tokens a syntax error says were expected, in its token order,
#: from cel-python's (lark's) terminal names.
_EXPECTED = (("__ANON_4", "'=='"), ("__ANON_5", "'!='"), ("IN", "'in'"), ("LESSTHAN", "'<'"), ("__ANON_2", "'<='"),
             ("__ANON_3", "'>='"), ("MORETHAN", "'>'"), ("__ANON_1", "'&&'"), ("__ANON_0", "'||'"),
             ("LSQB", "'['"), ("RSQB", "']'"), ("LBRACE", "'{'"), ("RBRACE", "'}'"), ("LPAR", "'('"),
             ("RPAR", "')'"), ("DOT", "'.'"), ("COMMA", "','"), ("MINUS", "'-'"), ("BANG", "'!'"),
             ("QMARK", "'?'"), ("COLON", "':'"), ("PLUS", "'+'"), ("STAR", "'*'"), ("SLASH", "'/'"),
             ("PERCENT", "'%'"), ("BOOL_LIT", "'true', 'false'"), ("NULL_LIT", "'null'"),
             ("FLOAT_LIT", "NUM_FLOAT"), ("INT_LIT", "NUM_INT"), ("UINT_LIT", "NUM_UINT"),
             ("STRING_LIT", "STRING"), ("MLSTRING_LIT", "STRING"), ("BYTES_LIT", "BYTES"), ("IDENT", "IDENTIFIER"))


def _located(expression: str, line: int, column: int, text: str) -> str:
    """cel-go's error form: ``ERROR: <input>:L:C: text`` and the line with a caret under column C."""
    source = expression.splitlines()[line - 1] if expression.splitlines() else ""
    return f"ERROR: <input>:{line}:{column}: {text}\n | {source}\n | {'.' * (column - 1)}^"


def _syntax_error(expression: str, error: BaseException | None) -> str:
    """A parse error in cel-go's words. Checked against kube-apiserver v1.36.2
    (tests/data/real/dra-cel/): the end of input and a character no token starts with are worded
    and placed exactly; another misplaced token gets ANTLR's "mismatched input" wording, which
    ANTLR sometimes words otherwise ("extraneous input", "no viable alternative")."""
    if isinstance(error, lark.UnexpectedToken) and error.token.type == "$END":
        lines = expression.split("\n")
        expected = ", ".join(dict.fromkeys(name for terminal, name in _EXPECTED if terminal in error.expected))
        return _located(expression, len(lines), len(lines[-1]) + 1,
                        f"Syntax error: mismatched input '<EOF>' expecting {{{expected}}}")
    if isinstance(error, lark.UnexpectedCharacters):
        # ANTLR's lexer reports what it consumed before giving up: the character and the next one.
        at = expression.split("\n")[error.line - 1][error.column - 1:error.column + 1]
        return _located(expression, error.line, error.column, f"Syntax error: token recognition error at: '{at}'")
    if isinstance(error, lark.UnexpectedToken):
        expected = ", ".join(dict.fromkeys(name for terminal, name in _EXPECTED if terminal in error.expected))
        return _located(expression, error.line, error.column,
                        f"Syntax error: mismatched input '{error.token}' expecting {{{expected}}}")
    return _located(expression, 1, 1, "Syntax error")


def _first_token(tree: lark.Tree[lark.Token]) -> lark.Token | None:
    return next(iter(tree.scan_values(lambda v: isinstance(v, lark.Token))), None)


def _semantic_error(expression: str, tree: lark.Tree[lark.Token]) -> str | None:
    """What cel-go's checker refuses that a parser accepts: a variable other than ``device`` (and
    the macros' own), a field ``device`` does not have, a global function that does not exist. The
    checker's other findings (types, e.g. a selector that is a string, not a bool) are not made."""
    bound = _bound_variables(tree)
    found: list[tuple[int, int, str]] = []
    for sub in tree.iter_subtrees():
        token = sub.children[0] if sub.children else None
        if sub.data == "ident" and isinstance(token, lark.Token):
            if str(token) not in {"device", *bound}:
                found.append((token.line or 1, token.column or 1,
                              f"undeclared reference to '{token}' (in container '')"))
        elif sub.data == "ident_arg" and isinstance(token, lark.Token):
            if str(token) not in GLOBAL_FUNCTIONS:
                found.append((token.line or 1, (token.column or 1) + len(str(token)),
                              f"undeclared reference to '{token}' (in container '')"))
        elif sub.data == "member_dot" and len(sub.children) > 1 and isinstance(sub.children[1], lark.Token):
            inner, field = sub.children[0], sub.children[1]
            target = inner.children[0] if isinstance(inner, lark.Tree) and inner.children else None
            if (isinstance(target, lark.Tree) and target.data == "primary" and target.children
                    and isinstance(target.children[0], lark.Tree) and target.children[0].data == "ident"
                    and str(target.children[0].children[0]) == "device" and str(field) not in DEVICE_FIELDS):
                found.append((field.line or 1, (field.column or 2) - 1, f"undefined field '{field}'"))
    if not found:
        return None
    line, column, text = min(found)
    return _located(expression, line, column, text)


def _bound_variables(tree: lark.Tree[lark.Token]) -> set[str]:
    """The variables the comprehension macros bind (``x`` of ``list.all(x, ...)``)."""
    names = set()
    for sub in tree.iter_subtrees():
        if sub.data == "member_dot_arg" and len(sub.children) > 2 and str(sub.children[1]) in _MACROS:
            args = sub.children[2]
            first = args.children[0] if isinstance(args, lark.Tree) and args.children else None
            token = _first_token(first) if isinstance(first, lark.Tree) else None
            if token is not None and token.type == "IDENT":
                names.add(str(token))
    return names


@lru_cache(maxsize=4096)
def compile_error(expression: str) -> str | None:
    """None when kube-apiserver accepts ``expression`` as a device selector; otherwise why not, as
    the text that follows ``Invalid value: "<expression>": `` in its 422 (``compilation failed:
    ERROR: <input>:1:7: undefined field 'drivr'`` and the caret lines)."""
    try:
        tree = _env().compile(expression)
    except CELParseError as exc:
        return "compilation failed: " + _syntax_error(expression, exc.__context__)
    problem = _semantic_error(expression, tree)
    return None if problem is None else "compilation failed: " + problem


def _attribute_value(value: dict[str, Any]) -> Any:
    if "int" in value:
        return ct.IntType(int(value["int"]))
    if "bool" in value:
        return ct.BoolType(bool(value["bool"]))
    if "string" in value:
        return ct.StringType(str(value["string"]))
    if "version" in value:
        return parse_semver(str(value["version"]))
    raise CelError(f"attribute value without a type: {value!r}")


def device_activation(driver: str, device: dict[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for one ResourceSlice device (resource.k8s.io/v1 shape)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = _attribute_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = parse_quantity(str(cap["value"]))
    return {"device": ct.MapType({
        ct.StringType("driver"): ct.StringType(driver),
        ct.StringType("attributes"): ct.MapType({
            ct.StringType(d): ct.MapType({ct.StringType(k): v for k, v in a.items()}) for d, a in attributes.items()}),
        ct.StringType("capacity"): ct.MapType({
            ct.StringType(d): ct.MapType({ct.StringType(k): v for k, v in c.items()}) for d, c in capacity.items()}),
    })}
