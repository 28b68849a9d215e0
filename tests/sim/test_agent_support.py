"""Helpers for the node-agent tests: agents on a fake API server, waiting with watches, pod bodies."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client, watch

from gpuconf.probe_pods import make_cuda_probe_pod
from gpuconf.sim import FakeApiServer
from gpuconf.sim.agent import NodeAgents
from gpuconf.sim.profile import expand, load_profile, with_faults


@contextlib.contextmanager
def running_agents(server: FakeApiServer, api: client.ApiClient, profile: str, *, faults: list[dict[str, Any]] | None
                   = None, **options: Any) -> Iterator[NodeAgents]:
    """NodeAgents for a shipped profile (with faults), serving logs and confirming deletions."""
    p = load_profile(profile)
    cluster = expand(with_faults(p, faults) if faults else p)
    with NodeAgents(cluster, api, **options) as agents:
        agents.serve_logs(server)
        agents.confirm_deletions(server)
        yield agents


def wait_for(list_fn: Callable[..., Any], until: Callable[[Any], bool], *args: Any, timeout: float = 10.0,
             **kwargs: Any) -> Any:
    """The first object ``list_fn``'s watch shows that satisfies ``until``; fails with the last one
    seen once ``timeout`` passes (a watch, never a sleep loop)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        w = watch.Watch()
        left = max(1, int(deadline - time.monotonic() + 0.999))
        try:
            for event in w.stream(list_fn, *args, timeout_seconds=left, **kwargs):
                last = event["object"]
                if event["type"] != "DELETED" and until(last):
                    w.stop()
                    return last
                if time.monotonic() >= deadline:
                    w.stop()
                    break
        except urllib3.exceptions.ProtocolError:  # a cut watch (API fault tests): watch again
            continue
    raise AssertionError(f"timed out after {timeout}s; last object seen: {last}")


def wait_pod(core: client.CoreV1Api, namespace: str, name: str, until: Callable[[Any], bool],
             timeout: float = 10.0) -> Any:
    return wait_for(core.list_namespaced_pod, until, namespace, field_selector=f"metadata.name={name}",
                    timeout=timeout)


def finished(pod: Any) -> bool:
    return pod.status is not None and pod.status.phase in ("Succeeded", "Failed")


def wait_gone(core: client.CoreV1Api, namespace: str, name: str, timeout: float = 10.0) -> None:
    """Until the pod is deleted (a DELETED event, or absent from the first listing)."""
    deadline = time.monotonic() + timeout
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                          timeout_seconds=max(1, int(timeout))):
        if event["type"] == "DELETED":
            w.stop()
            return
        if time.monotonic() > deadline:
            break
    if core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}").items:
        raise AssertionError(f"pod {name} still exists after {timeout}s")


def probe_pod(name: str, namespace: str, node: str, *, gpus: int = 1, cuda: str = "13.0.2",
              runtime_class: str | None = "nvidia", env: dict[str, str] | None = None,
              registry: str | None = None) -> dict[str, Any]:
    """The suite's cuda-probe pod, bound to ``node`` by hand (no scheduler in these tests)."""
    pod = make_cuda_probe_pod(name=name, namespace=namespace, run_id="run-1", check="test", cuda=cuda, node=node,
                              gpu_count=gpus, runtime_class=runtime_class, env=env, registry=registry)
    pod["spec"]["nodeName"] = node
    for c in pod["spec"]["containers"]:  # the v37 client validates quantities as strings
        limits = c["resources"]["limits"]
        c["resources"]["limits"] = {k: str(v) for k, v in limits.items()}
    return pod


def plain_pod(name: str, node: str, *, image: str = "busybox:1.36", annotations: dict[str, str] | None = None,
              restart: str = "Never", limits: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if limits:
        container["resources"] = {"limits": limits}
    return {"metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"nodeName": node, "restartPolicy": restart, "containers": [container], **spec}}


def pod_events(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[str, str, str | None, str]]:
    """(type, reason, fieldPath, message) of the pod's events, oldest first (the recorder's names
    end in the creation time in nanoseconds)."""
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    items.sort(key=lambda e: e.metadata.name)
    return [(e.type, e.reason, e.involved_object.field_path, e.message) for e in items]
