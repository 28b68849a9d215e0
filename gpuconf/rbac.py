"""The in-cluster runner's permissions, checked against the API calls the suites make.

``manifests/runner/`` grants the runner's ServiceAccount a ClusterRole (cluster-scoped reads,
the NCCL preflight's cluster-wide pod list, the mig-parted ConfigMap) and a Role in the probe
namespace (what the probe campaigns create, follow and delete). This module reads those RBAC
objects and answers, as Kubernetes' RBAC authorizer does, whether a request is allowed
(:func:`allowed`) and which granted rules no recorded request used (:func:`unused_grants`), so a
test can keep the role exactly as large as the suites need: a new call the role lacks fails the
test with the rule to add, and a grant nothing uses must be removed or listed in
:data:`REAL_CLUSTER_ONLY` with its reason.

Requests are described as the API server's RequestInfo describes them (verb, API group,
resource, subresource, namespace, name); requests to non-resource URLs (``/version``, ``/api``,
``/apis/...`` discovery, ``/openapi``) are allowed to every authenticated identity by the
built-in ``system:discovery`` ClusterRole and are not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["REAL_CLUSTER_ONLY", "ApiRequest", "Grant", "Policy", "Rule", "allowed", "load_manifests", "load_policy",
           "missing", "rbac_verb", "suggest_rule", "unused_grants"]

#: Granted verbs no simulated run uses, with why a real cluster needs them. Keyed by
#: (api group, resource[/subresource], verb, namespace of the Role or "" for the ClusterRole).
REAL_CLUSTER_ONLY: Mapping[tuple[str, str, str, str], str] = {
    ("resource.k8s.io", "devicetaintrules", "list", ""):
        "DeviceTaintRules are listed only where served (DRADeviceTaintRules, beta and off by default in Kubernetes "
        "1.36); the simulated API server does not serve them",
}


@dataclass(frozen=True)
class ApiRequest:
    """One resource request, in the authorizer's terms (namespace "" = cluster-scoped or all namespaces)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def resource_path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else " cluster-wide"
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {self.resource_path}{named} (group {self.group or 'core'!r}){where}"


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a Role or ClusterRole."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def allows(self, request: ApiRequest) -> bool:
        """The RBAC authorizer's rule match (k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go)."""
        if not ({"*", request.verb} & set(self.verbs)):
            return False
        if not ({"*", request.group} & set(self.api_groups)):
            return False
        wanted = {"*", request.resource_path}
        if request.subresource:
            wanted.add(f"*/{request.subresource}")
        if not (wanted & set(self.resources)):
            return False
        # resourceNames restrict requests naming one object; create and collection requests name none.
        return not self.resource_names or (request.name in self.resource_names and request.verb != "create")


@dataclass(frozen=True)
class Grant:
    """One verb on one resource, granted by a rule of the ClusterRole (namespace "") or of a Role."""

    group: str
    resource: str
    verb: str
    namespace: str = ""
    resource_names: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.group, self.resource, self.verb, self.namespace)

    def covers(self, request: ApiRequest) -> bool:
        if self.namespace and request.namespace != self.namespace:
            return False
        rule = Rule((self.group,), (self.resource,), (self.verb,), self.resource_names)
        return rule.allows(request)

    def __str__(self) -> str:
        where = f"Role in {self.namespace}" if self.namespace else "ClusterRole"
        names = f" {list(self.resource_names)}" if self.resource_names else ""
        return f"{where}: {self.verb} {self.resource}{names} (group {self.group or 'core'!r})"


@dataclass(frozen=True)
class Policy:
    """What one identity may do: ClusterRole rules (bound cluster-wide) and Role rules per namespace."""

    cluster_rules: tuple[Rule, ...]
    namespace_rules: Mapping[str, tuple[Rule, ...]]

    def grants(self) -> list[Grant]:
        out = [Grant(g, r, v, "", rule.resource_names) for rule in self.cluster_rules
               for g in rule.api_groups for r in rule.resources for v in rule.verbs]
        out += [Grant(g, r, v, ns, rule.resource_names) for ns, rules in sorted(self.namespace_rules.items())
                for rule in rules for g in rule.api_groups for r in rule.resources for v in rule.verbs]
        return out


def rbac_verb(method: str, *, named: bool, watch: bool = False) -> str:
    """The RBAC verb of an HTTP request (kube-apiserver's RequestInfoFactory): GET on one object is
    get, on a collection list, with watch=true watch; POST create; PUT update; PATCH patch; DELETE
    on one object delete, on a collection deletecollection."""
    method = method.upper()
    if method == "GET":
        return "watch" if watch else "get" if named else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if method in verbs:
        return verbs[method]
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    raise ValueError(f"no RBAC verb for HTTP method {method}")


def allowed(policy: Policy, request: ApiRequest) -> bool:
    if any(rule.allows(request) for rule in policy.cluster_rules):
        return True
    return bool(request.namespace) and any(
        rule.allows(request) for rule in policy.namespace_rules.get(request.namespace, ()))


def suggest_rule(request: ApiRequest) -> str:
    """The rule that would allow ``request``, as YAML flow text for the role that should hold it."""
    where = f"Role in namespace {request.namespace}" if request.namespace else "ClusterRole"
    names = f", resourceNames: [{request.name}]" if request.name and request.verb != "create" else ""
    return (f"{where}: {{apiGroups: [{request.group!r}], resources: [{request.resource_path}], "
            f"verbs: [{request.verb}]{names}}}")


def missing(policy: Policy, requests: Iterable[ApiRequest]) -> list[tuple[ApiRequest, str]]:
    """The distinct requests the policy denies, each with the rule that would allow it."""
    seen: dict[ApiRequest, str] = {}
    for request in requests:
        if request not in seen and not allowed(policy, request):
            seen[request] = suggest_rule(request)
    return sorted(seen.items(), key=lambda item: str(item[0]))


def unused_grants(policy: Policy, requests: Iterable[ApiRequest],
                  reasons: Mapping[tuple[str, str, str, str], str] = REAL_CLUSTER_ONLY) -> list[Grant]:
    """Granted verbs no request used and no reason in ``reasons`` explains."""
    done = list(set(requests))
    return [g for g in policy.grants() if g.key not in reasons and not any(g.covers(r) for r in done)]


# -------------------------------------------------------------------------------------------------
# Reading the manifests


def _rules(doc: Mapping[str, Any], where: str) -> tuple[Rule, ...]:
    out = []
    for i, raw in enumerate(doc.get("rules") or []):
        if raw.get("nonResourceURLs"):
            raise ValueError(f"{where}: rule {i}: nonResourceURLs are not needed (system:discovery covers them)")
        out.append(Rule(tuple(raw.get("apiGroups") or ()), tuple(raw.get("resources") or ()),
                        tuple(raw.get("verbs") or ()), tuple(raw.get("resourceNames") or ())))
    return tuple(out)


def _binds(doc: Mapping[str, Any], account: str, account_namespace: str) -> bool:
    return any(s.get("kind") == "ServiceAccount" and s.get("name") == account
               and s.get("namespace", (doc.get("metadata") or {}).get("namespace")) == account_namespace
               for s in doc.get("subjects") or [])


def load_policy(docs: Sequence[Mapping[str, Any]], *, account: str, account_namespace: str) -> Policy:
    """The policy of ServiceAccount ``account_namespace/account`` from RBAC objects: ClusterRoles
    bound by ClusterRoleBindings (cluster-wide) and Roles or ClusterRoles bound by RoleBindings
    (in the binding's namespace). A binding to a role not among ``docs`` is an error."""
    by_kind: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for doc in docs:
        meta = doc.get("metadata") or {}
        by_kind[(str(doc.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))] = doc
    cluster: list[Rule] = []
    namespaced: dict[str, list[Rule]] = {}
    for (kind, namespace, name), doc in sorted(by_kind.items()):
        if kind not in ("ClusterRoleBinding", "RoleBinding") or not _binds(doc, account, account_namespace):
            continue
        ref = doc.get("roleRef") or {}
        role_ns = namespace if ref.get("kind") == "Role" else ""
        role = by_kind.get((str(ref.get("kind")), role_ns, str(ref.get("name"))))
        if role is None:
            raise ValueError(f"{kind} {name}: roleRef {ref.get('kind')} {ref.get('name')} is not in the manifests")
        rules = _rules(role, f"{ref.get('kind')} {ref.get('name')}")
        if kind == "ClusterRoleBinding":
            cluster.extend(rules)
        else:
            namespaced.setdefault(namespace, []).extend(rules)
    return Policy(tuple(cluster), {ns: tuple(rules) for ns, rules in namespaced.items()})


def load_manifests(directory: str | Path) -> list[dict[str, Any]]:
    """Every Kubernetes object of the ``*.yaml`` files in ``directory`` (the Kustomization excluded)."""
    out: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") != "Kustomization":
                out.append(doc)
    return out
