"""The three patch types the API server accepts: JSON patch, JSON merge patch, strategic merge patch.

* JSON patch (RFC 6902, ``application/json-patch+json``) and merge patch (RFC 7386,
  ``application/merge-patch+json``) are exact.
* Strategic merge patch (``application/strategic-merge-patch+json``, what the Python client sends for a
  dict body) is approximated with a merge-key table instead of Go struct tags. It covers what clients
  send in practice: lists of maps merged by key (containers by name, conditions by type, ...),
  ``metadata.finalizers`` merged as a set, ``null`` deleting a field, and the ``$patch: replace|delete``,
  ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>`` directives.
  Lists without an entry (tolerations, taints, containerStatuses, command, args) are replaced whole,
  as on a real server, where those fields carry no ``patchStrategy``.

All functions are pure: they never modify their inputs, and the result may share unchanged
subtrees with the original document, so callers must treat it as read-only or copy it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "MERGE_KEYS",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class PatchError(ValueError):
    """The patch does not apply to the document (the server answers 422), or is malformed (400)."""

    def __init__(self, message: str, *, malformed: bool = False) -> None:
        super().__init__(message)
        self.malformed = malformed


# ---------------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}", malformed=True)
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool, path: str) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of bounds in {path}")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"doc is missing path: {path}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_add=False, path=path)]
        else:
            raise PatchError(f"doc is missing path: {path}")
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing key: {path}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False, path=path)]
    raise PatchError(f"doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], for_add=True, path=path), value)
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing key: {path}")
        return doc, parent.pop(tokens[-1])
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, tokens[-1], for_add=False, path=path))
    raise PatchError(f"doc is missing path: {path}")


def _json_equal(a: Any, b: Any) -> bool:
    # Python says True == 1; JSON does not.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def json_patch(doc: Any, operations: Any) -> Any:
    """Apply an RFC 6902 operation list to a copy of ``doc``."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations", malformed=True)
    out = _copy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid json patch operation: {op!r}", malformed=True)
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation is missing a value", malformed=True)
        if kind == "add":
            out = _add(out, path, _copy(op["value"]))
        elif kind == "remove":
            out, _ = _remove(out, path)
        elif kind == "replace":
            try:
                _get(out, path)
            except PatchError:
                raise PatchError(f"replace operation does not apply: doc is missing key: {path}") from None
            if path == "":
                out = _copy(op["value"])
            else:
                out, _ = _remove(out, path)
                out = _add(out, path, _copy(op["value"]))
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{kind} operation is missing 'from'", malformed=True)
            if kind == "move":
                if path.startswith(source + "/"):
                    raise PatchError(f"cannot move {source} into its own child {path}")
                out, value = _remove(out, source)
            else:
                value = _copy(_get(out, source))
            out = _add(out, path, value)
        elif kind == "test":
            if not _json_equal(_get(out, path), op["value"]):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"unexpected json patch operation {kind!r}", malformed=True)
    return out


# ---------------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)


def merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# ---------------------------------------------------------------------------------------------------
# Strategic merge patch


@dataclass(frozen=True)
class MergeKey:
    """How a list field merges: by a key of its map items, or as a set of primitives (``key=None``)."""

    key: str | None


#: Path suffixes (field names from the root, list levels elided) to merge strategies, longest first
#: wins. Taken from the ``patchStrategy``/``patchMergeKey`` tags of k8s.io/api; anything absent is
#: replaced as a whole, which is also what the real server does for fields without tags.
MERGE_KEYS: Mapping[tuple[str, ...], MergeKey] = {
    ("containers",): MergeKey("name"),
    ("initContainers",): MergeKey("name"),
    ("ephemeralContainers",): MergeKey("name"),
    ("volumes",): MergeKey("name"),
    ("env",): MergeKey("name"),
    ("imagePullSecrets",): MergeKey("name"),
    ("resourceClaims",): MergeKey("name"),
    ("containers", "ports"): MergeKey("containerPort"),
    ("initContainers", "ports"): MergeKey("containerPort"),
    ("ephemeralContainers", "ports"): MergeKey("containerPort"),
    ("spec", "ports"): MergeKey("port"),  # Service ports
    ("volumeMounts",): MergeKey("mountPath"),
    ("volumeDevices",): MergeKey("devicePath"),
    ("hostAliases",): MergeKey("ip"),
    ("topologySpreadConstraints",): MergeKey("topologyKey"),
    ("conditions",): MergeKey("type"),
    ("addresses",): MergeKey("type"),  # Node status addresses
    ("podIPs",): MergeKey("ip"),
    ("hostIPs",): MergeKey("ip"),
    ("metadata", "ownerReferences"): MergeKey("uid"),
    ("metadata", "finalizers"): MergeKey(None),
}

_MAX_SUFFIX = max(len(k) for k in MERGE_KEYS)


def _strategy(path: tuple[str, ...], table: Mapping[tuple[str, ...], MergeKey]) -> MergeKey | None:
    for length in range(min(len(path), _MAX_SUFFIX), 0, -1):
        found = table.get(path[-length:])
        if found is not None:
            return found
    return None


def _strip(value: Any) -> Any:
    """Drop patch directives from a value that is inserted as a whole."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and set(v) == {"$patch"})]
    return value


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...],
                table: Mapping[tuple[str, ...], MergeKey]) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and item.get("$patch") == "replace")]
    strategy = _strategy(path, table)
    if strategy is None:
        return _strip(patch)  # type: ignore[no-any-return]
    if strategy.key is None:
        merged = list(original)
        merged.extend(item for item in patch if item not in merged)
        return merged
    key = strategy.key
    merged = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {key}")
        found = next((i for i, cur in enumerate(merged) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if found is not None:
                del merged[found]
        elif found is not None:
            merged[found] = _merge_map(merged[found], item, path, table)
        else:
            merged.append(_strip(item))
    return merged


def _merge_map(original: Mapping[str, Any], patch: Mapping[str, Any], path: tuple[str, ...],
               table: Mapping[tuple[str, ...], MergeKey]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip(dict(patch))  # type: ignore[no-any-return]
    if directive == "delete":
        return {}
    if directive is not None:
        raise PatchError(f"unknown patch type: {directive}")
    out = dict(original)
    # Deletions from primitive lists happen before merging, as in apimachinery's mergeMap.
    for key, values in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list) and isinstance(values, list):
                out[field] = [v for v in out[field] if v not in values]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                out.pop(key, None)
            elif isinstance(out.get(key), dict):
                out[key] = _merge_map(out[key], value, path + (key,), table)
            else:
                out[key] = _strip(value)
        elif isinstance(value, list):
            current = out.get(key)
            out[key] = _merge_list(current if isinstance(current, list) else [], value, path + (key,), table)
        else:
            out[key] = value
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list", malformed=True)
        out = {k: v for k, v in out.items() if k in retain}
    for key, order in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(order, list):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = _ordered(out[field], order, _strategy(path + (field,), table))
    return out


def _ordered(items: list[Any], order: list[Any], strategy: MergeKey | None) -> list[Any]:
    """Apply ``$setElementOrder``: listed items first in the given order, the rest after."""
    def ident(item: Any) -> Any:
        if strategy is not None and strategy.key is not None and isinstance(item, dict):
            return item.get(strategy.key)
        return item

    wanted = [ident(o) for o in order]
    rank = {json.dumps(w, sort_keys=True): i for i, w in enumerate(wanted)}
    return sorted(items, key=lambda it: rank.get(json.dumps(ident(it), sort_keys=True), len(rank)))


def strategic_merge_patch(doc: Mapping[str, Any], patch: Any,
                          table: Mapping[tuple[str, ...], MergeKey] = MERGE_KEYS) -> dict[str, Any]:
    """Apply a strategic merge patch to ``doc`` using the merge-key ``table``."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", malformed=True)
    return _merge_map(doc, patch, (), table)


def apply_patch(content_type: str, doc: Mapping[str, Any], body: Any, *,
                table: Mapping[tuple[str, ...], MergeKey] = MERGE_KEYS) -> Any:
    """Dispatch on the request's Content-Type (parameters such as ``; charset=utf-8`` ignored)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == JSON_PATCH:
        return json_patch(doc, body)
    if kind == MERGE_PATCH:
        if not isinstance(body, dict):
            raise PatchError("merge patch must be a JSON object", malformed=True)
        return merge_patch(doc, body)
    if kind == STRATEGIC_MERGE_PATCH:
        return strategic_merge_patch(doc, body, table)
    raise PatchError(f"unsupported patch type {content_type!r}", malformed=True)


def supported_patch_types(*, strategic: bool) -> Sequence[str]:
    """The media types the server lists in its 415 answer (custom resources have no strategic merge)."""
    return (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH) if strategic else (JSON_PATCH, MERGE_PATCH)
