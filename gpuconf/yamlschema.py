"""YAML documents checked by a JSON Schema, every problem reported as one line at file:line:col.

The files users write for gpuconf (simulated-cluster profiles, ``--expect`` profiles) are YAML
validated with jsonschema. jsonschema knows the field path of a problem but not where it is in
the file; this module keeps PyYAML's node tree next to the data so a problem points at the
line and column of the offending value (or key), and turns jsonschema's errors into short
sentences: ``bad.yaml:7:5: pools[0].gpu_count: unknown field (allowed: name, count, ...)``.

Each caller subclasses :class:`DocumentError` (its own exception type) and :class:`Document`
(which makes errors of that type), then calls :func:`read` and :func:`validate`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any, ClassVar, TypeVar, cast

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

__all__ = ["Document", "DocumentError", "FieldPath", "describe", "fmt_path", "read", "schema", "schema_problem",
           "validate"]

FieldPath = tuple[str | int, ...]  # a field path into the document: ("pools", 1, "gpu")


class DocumentError(Exception):
    """A document that cannot be loaded: ``<file>:<line>:<col>: <field>: <problem>`` (the position
    and the field are left out when unknown)."""

    def __init__(self, where: str, field_path: str, problem: str, line: int | None = None,
                 column: int | None = None) -> None:
        self.file, self.field, self.problem, self.line, self.column = where, field_path, problem, line, column
        position = f":{line}:{column}" if line is not None else ""
        super().__init__(f"{where}{position}: {field_path}: {problem}" if field_path else
                         f"{where}{position}: {problem}")


def fmt_path(path: FieldPath) -> str:
    """``("pools", 0, "gpu")`` → ``pools[0].gpu``; the empty path is ``(top level)``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class Document:
    """A parsed file's node tree: makes errors with a line and column when it can.

    Subclasses set ``error_type`` to the exception their loader raises.
    """

    error_type: ClassVar[type[DocumentError]] = DocumentError

    def __init__(self, name: str, root: yaml.Node | None = None) -> None:
        self.name, self.root = name, root

    def node(self, path: FieldPath, *, key: bool = False) -> yaml.Node | None:
        """The node at ``path`` (its key's node with ``key``), or the deepest one that exists."""
        node = self.root
        for i, part in enumerate(path):
            if isinstance(node, yaml.MappingNode):
                hit = next(((k, v) for k, v in node.value if k.value == part), None)
                if hit is None:
                    return node
                node = hit[0] if key and i == len(path) - 1 else hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                return node
        return node

    def error(self, path: FieldPath, problem: str, *, key: bool = False) -> DocumentError:
        node = self.node(path, key=key)
        if node is None:
            return self.error_type(self.name, fmt_path(path), problem)
        mark = node.start_mark
        return self.error_type(self.name, fmt_path(path), problem, mark.line + 1, mark.column + 1)

    def error_at(self, path: FieldPath, problem: str, mark: yaml.Mark | None) -> DocumentError:
        """An error at a position PyYAML reported (``path`` may be ``("(yaml)",)``)."""
        if mark is None:
            return self.error_type(self.name, fmt_path(path), problem)
        return self.error_type(self.name, fmt_path(path), problem, mark.line + 1, mark.column + 1)


D = TypeVar("D", bound=Document)


def _check_keys(node: yaml.Node, doc: Document, path: FieldPath) -> None:
    """Reject duplicate and non-string mapping keys (PyYAML would silently keep the last)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode) or k.tag != "tag:yaml.org,2002:str":
                raise doc.error_at(path, f"keys must be strings, not {k.value!r}", k.start_mark)
            if k.value in seen:
                raise doc.error_at((*path, k.value), f"duplicate key (first on line {seen[k.value]})", k.start_mark)
            seen[k.value] = k.start_mark.line + 1
            _check_keys(v, doc, (*path, k.value))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_keys(item, doc, (*path, i))


def read(text: str, name: str, document: type[D], *, empty: str) -> tuple[Any, D]:
    """Parse one YAML document: (the data, its :class:`Document`). Syntax errors, duplicate keys
    and an empty file (``empty`` says what the file should hold) raise ``document.error_type``."""
    loader = yaml.SafeLoader(text)
    doc = document(name)
    try:
        root = loader.get_single_node()
        doc.root = root
        if root is None:
            raise doc.error_type(name, "", f"empty file: {empty}", 1, 1)
        _check_keys(root, doc, ())
        return loader.construct_document(root), doc
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = f"invalid YAML: {e.problem or e.context}"
        if mark is None:
            raise doc.error_type(name, "", problem) from e
        raise doc.error_at(("(yaml)",), problem, mark) from e
    finally:
        loader.dispose()


def schema(name: str) -> dict[str, Any]:
    """``gpuconf/data/schemas/<name>.schema.json``, parsed."""
    text = resources.files("gpuconf.data").joinpath(f"schemas/{name}.schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


VERSION_HINT = 'quote versions: "580.95.05"'


def validate(data: Any, doc: Document, json_schema: Mapping[str, Any], *,
             patterns: Mapping[str, str] | None = None, quote_hint: str = VERSION_HINT) -> None:
    """Raise the schema problem that comes first in the file, if any (see :func:`schema_problem`)."""
    errors = list(Draft202012Validator(json_schema).iter_errors(data))
    if errors:
        made = [doc.error(path, problem, key=key)
                for path, problem, key in (schema_problem(e, patterns, quote_hint) for e in errors)]
        raise min(made, key=lambda err: (err.line or 0, err.column or 0))


_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def describe(value: Any) -> str:
    """A value as a sentence fragment: ``a string ('x')``, ``an integer (3)``, ``a list``."""
    kind = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
    return kind if isinstance(value, dict | list) or value is None else f"{kind} ({value!r})"


def _branch_error(error: ValidationError) -> ValidationError | None:
    """For a failed ``oneOf``/``anyOf``: the first error of the only branch whose declared ``type``
    fits the value (``nodes: -1`` against ``integer >= 0 | {min: N}`` is a bound problem, not a
    shape problem), or None when no single branch fits."""
    branches = error.validator_value if isinstance(error.validator_value, list) else []
    checker = Draft202012Validator.TYPE_CHECKER
    fitting = [i for i, b in enumerate(branches) if isinstance(b, dict) and "type" in b
               and any(checker.is_type(error.instance, t) for t in ([b["type"]] if isinstance(b["type"], str)
                                                                      else b["type"]))]
    if len(fitting) != 1:
        return None
    return next((e for e in error.context or () if e.relative_schema_path and
                 e.relative_schema_path[0] == fitting[0]), None)


def schema_problem(error: ValidationError, patterns: Mapping[str, str] | None = None,
                   quote_hint: str = VERSION_HINT) -> tuple[FieldPath, str, bool]:
    """A jsonschema error as (field path, problem, point at the key rather than the value).

    ``patterns`` names what a regular expression stands for (``{"^[0-9]+(\\.[0-9]+)+$": "a dotted
    version such as 580.95.05"}``), so a mismatch reads as a sentence, not as the expression. A
    ``oneOf``/``anyOf`` reports the problem inside the one branch the value's type fits, else the
    value as not being the schema's ``description``. ``quote_hint`` follows a number given where a
    string is wanted (``{value}`` is replaced by the number).
    """
    if error.validator in ("oneOf", "anyOf"):
        inner = _branch_error(error)
        if inner is not None:
            return schema_problem(inner, patterns, quote_hint)
    path: FieldPath = tuple(error.absolute_path)
    v, value, schema_ = error.validator, error.instance, error.schema
    if v == "required" and isinstance(value, dict):
        missing = next(k for k in cast(list[str], error.validator_value) if k not in value)
        return (*path, missing), "required field is missing", False
    if v == "additionalProperties" and isinstance(value, dict) and isinstance(schema_, dict):
        allowed = list(schema_.get("properties", {}))
        extra = next(k for k in value if k not in allowed)
        return (*path, extra), f"unknown field (allowed: {', '.join(allowed)})", True
    if v == "propertyNames" or "propertyNames" in error.relative_schema_path:
        # A key failing propertyNames: jsonschema reports the mapping's path and the key as the value.
        meaning = (patterns or {}).get(str(error.validator_value)) if v == "pattern" else None
        return (*path, str(value)), f"{value!r} is not {meaning}" if meaning else f"invalid key {value!r}", True
    if v == "type":
        wanted = [str(t) for t in (error.validator_value if isinstance(error.validator_value, list)
                                   else [error.validator_value])]
        problem = f"expected {' or '.join(_TYPE_NAMES.get(t, t) for t in wanted)}, got {describe(value)}"
        if isinstance(value, float | int) and not isinstance(value, bool) and "string" in wanted:
            problem += f" ({quote_hint.format(value=value)})"
        return path, problem, False
    if v == "enum":
        return path, f"{value!r} is not one of {', '.join(map(str, cast(list[Any], error.validator_value)))}", False
    if v == "const":
        return path, f"must be {error.validator_value!r}, not {value!r}", False
    if v == "pattern":
        meaning = (patterns or {}).get(str(error.validator_value))
        if meaning is not None:
            return path, f"{value!r} is not {meaning}", False
        return path, f"{value!r} does not match {error.validator_value}", False
    bounds = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if v in bounds:
        return path, f"must be {bounds[str(v)]} {error.validator_value}, not {value!r}", False
    if v in ("minItems", "minProperties"):
        if v == "minProperties" and isinstance(schema_, dict) and schema_.get("properties"):
            return path, f"must declare at least one of: {', '.join(schema_['properties'])}", False
        return path, "must not be empty", False
    if v == "uniqueItems":
        return path, f"has duplicate items: {value!r}", False
    if v == "maxLength":
        return path, f"longer than {error.validator_value} characters", False
    if v in ("oneOf", "anyOf") and isinstance(schema_, dict) and "description" in schema_:
        return path, f"{describe(value)} is not {schema_['description']}", False
    return path, error.message, False
