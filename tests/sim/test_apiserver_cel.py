"""DRA's CEL selectors are compiled when a DeviceClass, ResourceClaim or ResourceClaimTemplate is
created, and one that does not compile is refused with 422 as kube-apiserver v1.36.2 refuses it.

tests/data/real/dra-cel/refusals.json holds the real server's answers (see its SOURCES.md); the
simulated server must give the same answer, word for word, to the same request. The suite's own
selectors must compile, so a typo in one fails a simulated run at once, as it would on a cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpuconf.checks import dra as checks
from gpuconf.probe_pods import ClaimRequest, make_resource_claim_template
from gpuconf.sim.agent_model import make_device_classes
from gpuconf.sim.cel import compile_error

REAL = json.loads((Path(__file__).parents[1] / "data" / "real" / "dra-cel" / "refusals.json").read_text())


def answer(api_client: client.ApiClient, namespace: str, kind: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    resource = client.ResourceV1Api(api_client)
    create = {"ResourceClaim": lambda: resource.create_namespaced_resource_claim(namespace, body),
              "ResourceClaimTemplate": lambda: resource.create_namespaced_resource_claim_template(namespace, body),
              "DeviceClass": lambda: resource.create_device_class(body)}[kind]
    try:
        create()
    except client.ApiException as e:
        return int(e.status), json.loads(e.body)
    return 201, {}


@pytest.mark.parametrize("sample", REAL, ids=[f"{s['kind']}: {s['answer']['details']['causes'][0]['message'][15:60]}"
                                               for s in REAL])
def test_a_selector_that_does_not_compile_gets_the_real_servers_answer(api_client, namespace, sample):
    status, body = answer(api_client, namespace, sample["kind"], sample["body"])
    assert status == sample["status"]
    assert same_refusal(body, sample["answer"])


def same_refusal(simulated: dict[str, Any], real: dict[str, Any]) -> bool:
    """The same Status, word for word, but for one known difference: after a syntax error cel-go's
    parser recovers and reports the next errors too (``ERROR: ...`` blocks after the first); the
    simulated server reports the first only."""
    def first_error(text: str) -> str:
        head, sep, rest = text.partition("ERROR: <input>:")
        return head + sep + rest.split("\nERROR: <input>:")[0]

    def trimmed(status: dict[str, Any]) -> dict[str, Any]:
        causes = [{**c, "message": first_error(c["message"])} for c in status["details"]["causes"]]
        return {**status, "message": first_error(status["message"]), "details": {**status["details"], "causes": causes}}

    return simulated == real or simulated == trimmed(real)


def _suite_selectors() -> list[str]:
    """Every CEL expression a run or the simulated DRA driver writes."""
    steering = [checks.Steering(attribute, value, ("n1",), ("n1", "n2")).selector
                for attribute, value in (("productName", "NVIDIA H100 80GB HBM3"), ("driverVersion", "580.95.5"))]
    classes = [s["cel"]["expression"] for c in make_device_classes(["gpu.nvidia.com"]) for s in c["spec"]["selectors"]]
    return [checks.UNSATISFIABLE_SELECTOR, checks.memory_selector(40), *steering, *classes]


@pytest.mark.parametrize("expression", _suite_selectors())
def test_the_suites_selectors_compile_and_a_typo_in_one_is_refused(api_client, namespace, expression):
    assert compile_error(expression) is None
    template = make_resource_claim_template(name="t", namespace=namespace, run_id="r", check="dra",
                                            requests=[ClaimRequest("gpu", checks.GPU_CLASS, (expression,))])
    assert answer(api_client, namespace, "ResourceClaimTemplate", template) == (201, {})
    typo = expression.replace("device.", "devcie.", 1)
    template["metadata"]["name"] = "typo"
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] = typo
    status, body = answer(api_client, namespace, "ResourceClaimTemplate", template)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "message": f"Invalid value: {json.dumps(typo)}: compilation failed: ERROR: <input>:1:1: undeclared reference "
                   f"to 'devcie' (in container '')\n | {typo}\n | ^"}]


@pytest.mark.parametrize("expression", [
    'device.driver == "gpu.nvidia.com" && device.allowMultipleAllocations == false',
    "has(device.attributes['gpu.nvidia.com'].uuid) && device.attributes['gpu.nvidia.com'].all(k, k != '')",
    "device.attributes['gpu.nvidia.com'].productName.matches('H100') && size(device.driver) > 0",
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))",
], ids=["allowMultipleAllocations", "has() and a macro's variable", "methods and size()", "semver"])
def test_selectors_the_real_server_accepts_are_accepted(expression):
    assert compile_error(expression) is None
