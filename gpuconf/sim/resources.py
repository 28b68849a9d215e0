"""The resource table: which REST resources the fake API server serves, and how each kind behaves.

A :class:`ResourceType` is one ``(group, version, plural)`` as discovery lists it: its kind, scope,
short names, status subresource, accepted field selectors, and a :class:`Strategy` holding what the
real API server does for that kind on create and update (defaulting, name rules, conversions). The
generic store (:mod:`gpuconf.sim.store`) never special-cases a kind itself; it asks the table.

Creating a CustomResourceDefinition registers its served versions here at runtime
(:func:`crd_resource_types`), which is how ``nvidia.com/v1 clusterpolicies`` appears.

Everything here is pure data and pure functions over plain ``dict`` objects.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "BUILTIN_TYPES",
    "Cause",
    "CreateContext",
    "GroupResource",
    "NameRule",
    "ResourceTable",
    "ResourceType",
    "Strategy",
    "crd_resource_types",
    "validate_name",
]

Obj = dict[str, Any]
FieldPath = tuple[str, ...]

#: Verbs every ordinary resource supports, as discovery lists them.
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, order=True)
class GroupResource:
    """Where objects are stored: versions of one resource share storage, as in etcd."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass(frozen=True)
class Cause:
    """One field error of a 422 Invalid answer (``details.causes[]``)."""

    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueForbidden, ...
    message: str  # "Invalid value: \"X\": ..." as the real server words it
    field: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


@dataclass(frozen=True)
class CreateContext:
    """What a strategy may use when defaulting a new object."""

    uid: str
    now: str  # RFC 3339, seconds
    now_micro: str  # RFC 3339 with microseconds (metav1.MicroTime)


class NameRule(Enum):
    """The name validation a kind uses (apimachinery ``validation.NameIs...``)."""

    SUBDOMAIN = "subdomain"  # DNS-1123 subdomain: most kinds
    LABEL = "label"  # DNS-1123 label: namespaces
    LABEL_1035 = "label-1035"  # DNS-1035 label: services
    PATH_SEGMENT = "path-segment"  # anything that is a valid URL path segment: events, CRs


_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_1035_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")

# The real messages, verbatim (k8s.io/apimachinery/pkg/util/validation), including the double space.
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_LABEL_1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                   "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                   "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def validate_name(rule: NameRule, name: str, *, field_path: str = "metadata.name") -> list[Cause]:
    """The causes the real server reports for an invalid object name (empty list: valid)."""
    messages: list[str] = []
    if rule is NameRule.PATH_SEGMENT:
        if name in (".", ".."):
            messages.append(f"may not be '{name}'")
        for bad in ("/", "%"):
            if bad in name:
                messages.append(f"may not contain '{bad}'")
    else:
        pattern, limit, message = {
            NameRule.SUBDOMAIN: (_SUBDOMAIN_RE, 253, _SUBDOMAIN_MSG),
            NameRule.LABEL: (_LABEL_RE, 63, _LABEL_MSG),
            NameRule.LABEL_1035: (_LABEL_1035_RE, 63, _LABEL_1035_MSG),
        }[rule]
        if len(name) > limit:
            messages.append(f"must be no more than {limit} characters")
        if not pattern.fullmatch(name):
            messages.append(message)
    return [Cause("FieldValueInvalid", f'Invalid value: "{name}": {m}', field_path) for m in messages]


class Strategy:
    """Per-kind behaviour of the real API server's registry strategies. The defaults do nothing.

    Methods receive objects the store owns and may modify them in place.
    """

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        """Fill defaults on create (after metadata is set, before validation)."""

    def prepare_for_update(self, old: Obj, new: Obj) -> None:
        """Normalise an update (the store has already applied status/spec separation)."""

    def validate(self, obj: Obj) -> list[Cause]:
        """Kind-specific validation beyond the object name."""
        return []

    def to_storage(self, obj: Obj) -> Obj:
        """Convert an incoming object to the stored form (events.k8s.io events are stored as core events)."""
        return obj

    def from_storage(self, obj: Obj, rt: ResourceType) -> Obj:
        """Convert a stored object to what ``rt`` serves; by default only apiVersion may differ."""
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}


DEFAULT_STRATEGY = Strategy()


@dataclass(frozen=True)
class ResourceType:
    """One REST resource in one API version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    #: Whether ``/status`` is a separate subresource (main endpoint ignores status, /status only status).
    has_status: bool = False
    #: Other subresources served: "log" and "binding" for pods.
    subresources: tuple[str, ...] = ()
    #: Field selector labels beyond metadata.name/metadata.namespace, mapped to where the value lives.
    field_labels: Mapping[str, FieldPath] = field(default_factory=dict, compare=False, hash=False)
    #: Field labels the store indexes, so ``spec.nodeName=X`` lists and watches (one per node agent)
    #: touch only that node's objects, like the real watch cache's indexers.
    indexed_fields: tuple[str, ...] = ()
    name_rule: NameRule = NameRule.SUBDOMAIN
    #: DELETE answers with the object (pods, services, DRA kinds) rather than a Success Status.
    returns_deleted_object: bool = False
    #: metadata.generation is set and bumped on spec changes.
    tracks_generation: bool = True
    #: Status sent on create is kept (nodes, which the kubelet registers with status) instead of reset.
    keep_status_on_create: bool = False
    categories: tuple[str, ...] = ()
    #: A custom resource (from a CRD): no strategic merge patch, apiVersion/kind kept on list items.
    custom: bool = False
    #: Where objects live if not under this resource's own (group, plural).
    storage_as: GroupResource | None = None
    strategy: Strategy = field(default=DEFAULT_STRATEGY, compare=False, hash=False)
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.plural)

    @property
    def storage(self) -> GroupResource:
        return self.storage_as or self.group_resource

    @property
    def qualified(self) -> str:
        """``pods`` or ``leases.coordination.k8s.io``: how error messages name the resource."""
        return str(self.group_resource)

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def supported_field_labels(self) -> Mapping[str, FieldPath]:
        base: dict[str, FieldPath] = {"metadata.name": ("metadata", "name")}
        if self.namespaced:
            base["metadata.namespace"] = ("metadata", "namespace")
        return {**base, **self.field_labels}

    def discovery(self) -> list[dict[str, Any]]:
        """This resource's entries in an APIResourceList, subresources included."""
        verbs = [v for v in ALL_VERBS if not (self.plural == "namespaces" and v == "deletecollection")]
        main: dict[str, Any] = {
            "name": self.plural, "singularName": self.singular_name, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": verbs,
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        if self.has_status:
            out.append({"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": ["get", "patch", "update"]})
        sub_kinds = {"log": ("Pod", ["get"]), "binding": ("Binding", ["create"])}
        for sub in self.subresources:
            kind, sub_verbs = sub_kinds[sub]
            out.append({"name": f"{self.plural}/{sub}", "singularName": "", "namespaced": self.namespaced,
                        "kind": kind, "verbs": sub_verbs})
        return out


# ---------------------------------------------------------------------------------------------------
# Strategies of the built-in kinds


def _quantity_equal(a: Any, b: Any) -> bool:
    return str(a) == str(b)


def _qos_class(spec: Mapping[str, Any]) -> str:
    """Pod QoS class as the kubelet and API server compute it (cpu and memory only)."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or (name in requests and not _quantity_equal(requests[name], limits[name])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


class PodStrategy(Strategy):
    """Defaults from ``pkg/apis/core/v1/defaults.go`` plus the ServiceAccount admission plugin."""

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec)
        # The Priority and ServiceAccount admission plugins, which apply to pods only (not to templates).
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}

    def validate(self, obj: Obj) -> list[Cause]:
        """Of ``ValidatePodSpec``, what a pod without containers gets (tests/realk8s/test_mock_fidelity.py)
        and a required node affinity's field selector with other than one value for In/NotIn
        (``ValidateNodeFieldSelectorRequirement``; the real v1.36.2 apiserver refused gpuconf's steered
        pod so: tests/realk8s/test_mock_fidelity.py)."""
        spec = obj.get("spec") or {}
        if not spec.get("containers"):
            return [Cause("FieldValueRequired", "Required value", "spec.containers")]
        path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        causes = []
        for t, term in enumerate(required.get("nodeSelectorTerms") or []):
            for f, requirement in enumerate((term or {}).get("matchFields") or []):
                if requirement.get("operator") in ("In", "NotIn") and len(requirement.get("values") or []) != 1:
                    causes.append(Cause("FieldValueRequired", "Required value: must be only one value when "
                                        "`operator` is 'In' or 'NotIn' for node field selector",
                                        f"{path}.nodeSelectorTerms[{t}].matchFields[{f}].values"))
        return causes


def default_pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and its containers: applies to pods and to pod templates."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            _default_container(container)


def _default_container(container: Obj) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
    container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        # Requests default to limits (so an extended resource like nvidia.com/gpu is requested).
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


class NamespaceStrategy(Strategy):
    def default(self, obj: Obj, ctx: CreateContext) -> None:
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        self._label(obj)

    def prepare_for_update(self, old: Obj, new: Obj) -> None:
        self._label(new)

    @staticmethod
    def _label(obj: Obj) -> None:
        # The API server enforces this label on every namespace (KEP-2161).
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}


class SecretStrategy(Strategy):
    """``stringData`` is write-only: merged into base64 ``data`` and never stored."""

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        obj.setdefault("type", "Opaque")
        self._fold(obj)

    def prepare_for_update(self, old: Obj, new: Obj) -> None:
        self._fold(new)

    @staticmethod
    def _fold(obj: Obj) -> None:
        string_data = obj.pop("stringData", None)
        if string_data:
            data = dict(obj.get("data") or {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data


class ServiceStrategy(Strategy):
    """ClusterIP defaulting and allocation from 10.96.0.0/12, as with a default kubeadm cluster."""

    def __init__(self) -> None:
        self._next = itertools.count(10)

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                n = next(self._next)
                spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}


class JobStrategy(Strategy):
    """The Job defaults and generated selector (``pkg/registry/batch/job/strategy.go``)."""

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        spec = obj.setdefault("spec", {})
        if "completions" not in spec and "parallelism" not in spec:
            spec["completions"] = 1  # a non-parallel Job; with parallelism alone it is a work queue
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        if not spec.get("manualSelector"):
            name = obj["metadata"]["name"]
            generated = {"batch.kubernetes.io/controller-uid": ctx.uid, "batch.kubernetes.io/job-name": name,
                         "controller-uid": ctx.uid, "job-name": name}
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": ctx.uid}}
            template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            template_meta["labels"] = {**(template_meta.get("labels") or {}), **generated}
        default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
        obj["status"] = {}


class CrdStrategy(Strategy):
    """A CRD is accepted and Established at once (there is no controller to wait for)."""

    def default(self, obj: Obj, ctx: CreateContext) -> None:
        spec = obj.get("spec") or {}
        storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": ctx.now, "reason": r, "message": m}
            for t, r, m in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                            ("Established", "InitialNamesAccepted", "the initial names have been accepted"))
        ]
        obj["status"] = {"conditions": conditions, "acceptedNames": dict(spec.get("names") or {}),
                         "storedVersions": storage}

    def validate(self, obj: Obj) -> list[Cause]:
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        causes = []
        for key in ("plural", "kind"):
            if not names.get(key):
                causes.append(Cause("FieldValueRequired", "Required value", f"spec.names.{key}"))
        if not spec.get("group"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.group"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(Cause("FieldValueNotSupported",
                                f'Unsupported value: "{spec.get("scope", "")}": supported values: '
                                '"Cluster", "Namespaced"', "spec.scope"))
        if not spec.get("versions"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.versions"))
        name = obj["metadata"].get("name", "")
        expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
        if name != expected:
            message = f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'
            causes.append(Cause("FieldValueInvalid", message, "metadata.name"))
        return causes


# events.k8s.io/v1 Event <-> core/v1 Event field names (pkg/apis/events/v1/conversion.go); the
# real server stores both as one resource, so a kubelet's core event is visible to either API.
_EVENTS_V1_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_EVENTS_V1 = {v: k for k, v in _EVENTS_V1_TO_CORE.items()}


class DeviceSelectorStrategy(Strategy):
    """DeviceClasses, ResourceClaims and ResourceClaimTemplates: every CEL device selector must
    compile, or the object is refused with 422 as kube-apiserver refuses it (the field path, the
    quoted expression and cel-go's "compilation failed: ERROR: <input>:L:C: ..." text;
    tests/data/real/dra-cel/ holds the real server's answers). ``spec`` is where the claim spec
    sits: ``spec`` for a claim, ``spec.spec`` for a template, None for a DeviceClass."""

    def __init__(self, claim_spec: tuple[str, ...] | None) -> None:
        self.claim_spec = claim_spec

    def validate(self, obj: Obj) -> list[Cause]:
        from gpuconf.sim.cel import compile_error  # cel-python is imported only where selectors are

        causes = []
        for path, expression in self._selectors(obj):
            if not isinstance(expression, str):
                continue
            error = compile_error(expression)
            if error is not None:
                causes.append(Cause("FieldValueInvalid", f"Invalid value: {_go_quote(expression)}: {error}", path))
        return causes

    def _selectors(self, obj: Obj) -> Iterable[tuple[str, Any]]:
        if self.claim_spec is None:
            yield from _cel_selectors("spec.selectors", (obj.get("spec") or {}).get("selectors"))
            return
        spec: Any = obj
        for key in self.claim_spec:
            spec = spec.get(key) if isinstance(spec, dict) else None
        requests = ((spec or {}).get("devices") or {}).get("requests") if isinstance(spec, dict) else None
        where = ".".join(self.claim_spec) + ".devices.requests"
        for i, request in enumerate(requests if isinstance(requests, list) else []):
            if not isinstance(request, dict):
                continue
            exactly = request.get("exactly")
            if isinstance(exactly, dict):
                yield from _cel_selectors(f"{where}[{i}].exactly.selectors", exactly.get("selectors"))
            alternatives = request.get("firstAvailable")
            for k, sub in enumerate(alternatives if isinstance(alternatives, list) else []):
                if isinstance(sub, dict):
                    yield from _cel_selectors(f"{where}[{i}].firstAvailable[{k}].selectors", sub.get("selectors"))


def _cel_selectors(where: str, selectors: Any) -> Iterable[tuple[str, Any]]:
    for j, selector in enumerate(selectors if isinstance(selectors, list) else []):
        cel = selector.get("cel") if isinstance(selector, dict) else None
        if isinstance(cel, dict) and "expression" in cel:
            yield f"{where}[{j}].cel.expression", cel["expression"]


def _go_quote(text: str) -> str:
    """A string as Go's %q prints it in a field error (printable text: JSON's quoting)."""
    return json.dumps(text, ensure_ascii=False)


class EventsV1Strategy(Strategy):
    def to_storage(self, obj: Obj) -> Obj:
        out = {_EVENTS_V1_TO_CORE.get(k, k): v for k, v in obj.items()}
        out["apiVersion"], out["kind"] = "v1", "Event"
        return out

    def from_storage(self, obj: Obj, rt: ResourceType) -> Obj:
        out = {_CORE_TO_EVENTS_V1.get(k, k): v for k, v in obj.items()}
        out["apiVersion"], out["kind"] = rt.api_version, "Event"
        if not out.get("eventTime"):
            # eventTime is required in events.k8s.io/v1; legacy core events may lack it.
            stamp = out.get("deprecatedFirstTimestamp") or obj.get("metadata", {}).get("creationTimestamp")
            if isinstance(stamp, str) and stamp.endswith("Z"):
                out["eventTime"] = stamp[:-1] + ".000000Z"
        return out


# ---------------------------------------------------------------------------------------------------
# The built-in table

_POD_FIELDS: Mapping[str, FieldPath] = {
    "spec.nodeName": ("spec", "nodeName"),
    "spec.restartPolicy": ("spec", "restartPolicy"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "spec.hostNetwork": ("spec", "hostNetwork"),
    "status.phase": ("status", "phase"),
    "status.podIP": ("status", "podIP"),
    "status.nominatedNodeName": ("status", "nominatedNodeName"),
}

# Field selectors run against the stored (core) form, so both event APIs accept the core labels.
_EVENT_FIELDS: Mapping[str, FieldPath] = {
    **{f"involvedObject.{k}": ("involvedObject", k)
       for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": ("reason",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "type": ("type",),
}


def _core(plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, **kw)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("pods", "Pod", True, short_names=("po",), has_status=True, subresources=("log", "binding"),
          field_labels=_POD_FIELDS, indexed_fields=("spec.nodeName",), returns_deleted_object=True,
          categories=("all",), strategy=PodStrategy()),
    _core("nodes", "Node", False, short_names=("no",), has_status=True, keep_status_on_create=True,
          tracks_generation=False, field_labels={"spec.unschedulable": ("spec", "unschedulable")}),
    _core("namespaces", "Namespace", False, short_names=("ns",), has_status=True, name_rule=NameRule.LABEL,
          tracks_generation=False, field_labels={"status.phase": ("status", "phase")}, strategy=NamespaceStrategy()),
    _core("events", "Event", True, short_names=("ev",), field_labels=_EVENT_FIELDS, tracks_generation=False,
          indexed_fields=("involvedObject.name",), name_rule=NameRule.PATH_SEGMENT),
    _core("configmaps", "ConfigMap", True, short_names=("cm",), tracks_generation=False),
    _core("secrets", "Secret", True, tracks_generation=False, field_labels={"type": ("type",)},
          strategy=SecretStrategy()),
    _core("services", "Service", True, short_names=("svc",), has_status=True, name_rule=NameRule.LABEL_1035,
          returns_deleted_object=True, categories=("all",), strategy=ServiceStrategy()),
    _core("serviceaccounts", "ServiceAccount", True, short_names=("sa",), returns_deleted_object=True,
          tracks_generation=False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, tracks_generation=False),
    ResourceType("batch", "v1", "jobs", "Job", True, has_status=True, categories=("all",),
                 field_labels={"status.successful": ("status", "succeeded")}, strategy=JobStrategy()),
    ResourceType("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, tracks_generation=False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",),
                 tracks_generation=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",), field_labels=_EVENT_FIELDS,
                 tracks_generation=False, name_rule=NameRule.PATH_SEGMENT,
                 storage_as=GroupResource("", "events"), strategy=EventsV1Strategy()),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, returns_deleted_object=True,
                 strategy=DeviceSelectorStrategy(None)),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, returns_deleted_object=True,
                 field_labels={"spec.nodeName": ("spec", "nodeName"), "spec.driver": ("spec", "driver")},
                 indexed_fields=("spec.nodeName",)),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, has_status=True,
                 returns_deleted_object=True, strategy=DeviceSelectorStrategy(("spec",))),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True,
                 returns_deleted_object=True, strategy=DeviceSelectorStrategy(("spec", "spec"))),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
                 short_names=("crd", "crds"), has_status=True, strategy=CrdStrategy()),
)


def crd_resource_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        selectable = {}
        for entry in version.get("selectableFields") or []:
            path = str(entry.get("jsonPath", "")).lstrip(".")
            if path:
                selectable[path] = tuple(path.split("."))
        out.append(ResourceType(
            group=str(spec["group"]), version=str(version["name"]), plural=str(names["plural"]),
            kind=str(names["kind"]), namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            has_status="status" in (version.get("subresources") or {}), field_labels=selectable,
            name_rule=NameRule.PATH_SEGMENT, custom=True, singular=str(names.get("singular") or ""),
        ))
    return out


class ResourceTable:
    """A thread-safe registry of resource types, with the discovery documents built from it.

    Lookups read an immutable snapshot, so they take no lock; registration replaces the snapshot.
    """

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._lock = threading.Lock()
        self._types: tuple[ResourceType, ...] = ()
        self._index: dict[tuple[str, str, str], ResourceType] = {}
        self._names: dict[str, ResourceType] = {}
        self.register(types)

    def register(self, types: Iterable[ResourceType]) -> None:
        """Add (or replace, by group/version/plural) resource types."""
        with self._lock:
            new = {(t.group, t.version, t.plural): t for t in types}
            kept = tuple(t for t in self._types if (t.group, t.version, t.plural) not in new)
            self._publish(kept + tuple(new.values()))

    def unregister(self, group: str, plural: str) -> None:
        """Remove every version of a resource (a deleted CRD)."""
        with self._lock:
            self._publish(tuple(t for t in self._types if (t.group, t.plural) != (group, plural)))

    def _publish(self, types: tuple[ResourceType, ...]) -> None:
        self._types = types
        self._index = {(t.group, t.version, t.plural): t for t in types}
        self._names = self._name_index(types)

    @property
    def types(self) -> tuple[ResourceType, ...]:
        return self._types

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._index.get((group, version, plural))

    def resolve(self, name: str) -> ResourceType:
        """Find a type the way kubectl does: ``pods``, ``po``, ``Pod``, ``leases.coordination.k8s.io``.

        The core group wins ties (``events`` is core v1 events), then the first registered version.
        """
        found = self._names.get(name)
        if found is None:
            raise KeyError(f'the server doesn\'t have a resource type "{name}"')
        return found

    @staticmethod
    def _name_index(types: tuple[ResourceType, ...]) -> dict[str, ResourceType]:
        index: dict[str, ResourceType] = {}
        # The first entry for a word wins: core types come first (``events`` is the core resource),
        # then registration order (the first version).
        for t in sorted(types, key=lambda t: t.group == "", reverse=True):
            words = (t.plural, t.singular_name, t.kind, *t.short_names)
            for word in words:
                index.setdefault(word, t)
                if t.group:
                    index.setdefault(f"{word}.{t.group}", t)
        return index

    def storage_types(self, storage: GroupResource) -> list[ResourceType]:
        return [t for t in self._types if t.storage == storage]

    def namespaced_storages(self) -> list[GroupResource]:
        """Every namespaced storage, each once (a namespace's contents live under these)."""
        seen: dict[GroupResource, None] = {}
        for t in self._types:
            if t.namespaced:
                seen.setdefault(t.storage)
        return list(seen)

    def group_versions(self) -> dict[str, list[str]]:
        """Groups in registration order, each with its versions (first = preferred)."""
        out: dict[str, list[str]] = {}
        for t in self._types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    # Discovery documents -----------------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        """``/api``: the core group's versions (``serverAddressByClientCIDRs`` is required by the client)."""
        return {"kind": "APIVersions", "versions": self.group_versions().get("", ["v1"]),
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.group_versions().get(group)
        if not group or not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                "preferredVersion": dict(entries[0])}

    def api_group_list(self) -> dict[str, Any]:
        groups = [self.api_group(g) for g in self.group_versions() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}

    def api_resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = [t for t in self._types if t.group == group and t.version == version]
        if not types:
            return None
        resources = [entry for t in types for entry in t.discovery()]
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
