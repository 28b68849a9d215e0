"""The probe output schemas, in one place: ``gpuconf/probe_schemas/<name>.v<N>.json``."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

from gpuconf.probes.errors import ProbeParseError

__all__ = ["SCHEMAS", "load_schema", "parse_document", "validator"]

#: The schema id each probe prints in its ``schema`` field → the file that defines it.
SCHEMAS = {
    "gpuconf.cuda-probe/v1": "cuda-probe.v1.json",
    "gpuconf.nccl-probe/v1": "nccl-probe.v1.json",
}

#: The documents that already matched their schema, by (schema id, SHA-256 of the text), most recent
#: last: jsonschema's validation is ~95% of a parse, and the isolation suite's checks read each of a
#: node's six documents three times on average (issue 29). Digests, not texts: nothing is kept alive.
_VALID: OrderedDict[tuple[str, bytes], None] = OrderedDict()
_VALID_MAX = 65536


@cache
def load_schema(schema_id: str) -> dict[str, Any]:
    text = resources.files("gpuconf.probe_schemas").joinpath(SCHEMAS[schema_id]).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def validator(schema_id: str) -> Draft202012Validator:
    schema = load_schema(schema_id)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


#: Keywords that only annotate: a ``$ref`` beside nothing else is replaced by its target outright.
_ANNOTATIONS = frozenset({"description", "title", "$comment"})


def inline_refs(node: Any, defs: dict[str, Any], within: tuple[str, ...] = ()) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/<name>"}`` replaced by that definition (beside other
    validation keywords, one more ``allOf`` member): the same documents are valid, and
    jsonschema validates a third faster without resolving references. A recursive reference stays."""
    if isinstance(node, list):
        return [inline_refs(v, defs, within) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    name = ref.removeprefix("#/$defs/") if isinstance(ref, str) else None
    if name is None or name not in defs or name in within:
        return {k: v if k == "$defs" else inline_refs(v, defs, within) for k, v in node.items()}
    target = inline_refs(defs[name], defs, (*within, name))
    if set(node) - {"$ref"} <= _ANNOTATIONS:
        return target
    rest = {k: inline_refs(v, defs, within) for k, v in node.items() if k != "$ref"}
    return {**rest, "allOf": [*rest.get("allOf", []), target]}


@cache
def _fast_validator(schema_id: str) -> Draft202012Validator:
    """Whether a document is valid, quickly; its errors, when it is not, come from validator()."""
    schema = load_schema(schema_id)
    return Draft202012Validator(inline_refs(schema, schema.get("$defs", {})))


def parse_document(text: str, schema_id: str, *, source: str) -> dict[str, Any]:
    """Exactly one JSON document of the given schema, validated; anything else is an error.

    ``text`` is the probe's whole stdout. Truncated output, a second document, text that is not
    JSON, another program's output or a document of another schema each raise ProbeParseError
    saying which.
    """
    stripped = text.strip()
    if not stripped:
        raise ProbeParseError("no output (the probe printed nothing on stdout)", source=source)
    if not stripped.startswith("{"):
        first = stripped.splitlines()[0][:80]
        raise ProbeParseError(f"not a {schema_id} document: output starts with {first!r}", source=source)
    try:
        doc, end = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(stripped) - 1 or exc.msg.startswith("Unterminated string"):
            raise ProbeParseError(f"output ends before the JSON document is complete ({len(stripped)} bytes; "
                                  "the probe was killed or its output truncated)", source=source) from exc
        raise ProbeParseError(f"garbled JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                              source=source, line=exc.lineno) from exc
    rest = stripped[end:].strip()
    if rest:
        raise ProbeParseError(f"unexpected text after the JSON document: {rest[:60]!r}", source=source)
    if not isinstance(doc, dict):
        raise ProbeParseError(f"not a {schema_id} document: top level is {type(doc).__name__}", source=source)
    found = doc.get("schema")
    if found != schema_id:
        raise ProbeParseError(f"expected a {schema_id} document, got schema {found!r}", source=source)
    key = (schema_id, hashlib.sha256(stripped.encode()).digest())
    if key in _VALID:
        _VALID.move_to_end(key)
        return doc
    errors = [] if _fast_validator(schema_id).is_valid(doc) else sorted(
        validator(schema_id).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first_error = errors[0]
        path = "/".join(str(p) for p in first_error.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ProbeParseError(f"does not match {schema_id} at {path}: {first_error.message}{more}", source=source)
    _VALID[key] = None
    if len(_VALID) > _VALID_MAX:
        _VALID.popitem(last=False)
    return doc
