"""Waiting in tests the way the suite waits on a cluster: list, then watch from the list's
resourceVersion until a condition holds or a deadline passes — never a sleep loop."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch


def _watch(listing: Any) -> watch.Watch:
    """A Watch that decodes events as the list decodes items (the client guesses some names wrong,
    e.g. V1ResourceClaim for what is ResourceV1ResourceClaim)."""
    items = type(listing).openapi_types["items"]  # "List[V1Pod]"
    return watch.Watch(return_type=items[len("List["):-1])


def wait_for(list_fn: Callable[..., Any], *args: Any, until: Callable[[Any], bool], timeout: float = 5.0,
             **kwargs: Any) -> Any:
    """The first object ``list_fn`` lists or a watch on it delivers for which ``until`` holds."""
    deadline = time.monotonic() + timeout
    listing = list_fn(*args, **kwargs)
    last = None
    for item in listing.items:
        last = item
        if until(item):
            return item
    rv = listing.metadata.resource_version
    stream = _watch(listing)
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            for event in stream.stream(list_fn, *args, resource_version=rv, timeout_seconds=math.ceil(remaining),
                                       **kwargs):
                obj = event["object"]
                rv = obj.metadata.resource_version
                last = obj
                if event["type"] != "DELETED" and until(obj):
                    return obj
                if time.monotonic() > deadline:
                    break
    finally:
        stream.stop()
    raise AssertionError(f"condition not met within {timeout}s; last object seen: {last}")
