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

__all__ = ["CelError", "Quantity", "Semver", "compile_selector", "device_activation", "parse_quantity"]


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

_ENV = celpy.Environment()


class Selector:
    """A compiled selector expression; ``matches(device)`` is True, False or raises CelError."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self._program = _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
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
