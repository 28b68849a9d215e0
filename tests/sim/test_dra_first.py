"""DRA-first clusters in the simulator (issue 27): the GPU Operator's GPUCluster mode without GFD,
device taints in ResourceSlices and the allocator, DRA-backed extended resources (KEP-5004)."""

from __future__ import annotations

import pytest
from kubernetes import client

from gpuconf.sim.node_facts import node_labels, resource_slices
from gpuconf.sim.profile import ProfileError, expand, load_profile

from .test_agent_support import running_agents

GPUCLUSTER = """\
schema: 1
name: bad
description: GPUCluster mode with one thing wrong
kubernetes: "1.36"
operator: {present: true, mode: gpucluster}
pools:
  - name: h200
    count: 1
    gpu: H200
    gpus_per_node: 8
    driver: "580.95.05"
    toolkit: {version: "1.18.0"}
    dra: {enabled: true}
"""


# --- GPUCluster mode -----------------------------------------------------------------------------


def test_gpucluster_nodes_carry_no_nvidia_label_but_keep_nfd_and_publish_slices():
    cluster = expand(load_profile("h200-gpucluster"))
    for node in cluster.nodes:
        labels = node_labels(node)
        assert not [k for k in labels if k.startswith("nvidia.com/")], labels
        assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
        assert len(resource_slices(node)[0]["spec"]["devices"]) == 8  # type: ignore[index]
        assert not node.device_plugin.enabled


def test_the_dra_only_profile_under_a_cluster_policy_still_has_gfd_labels():
    node = expand(load_profile("h200-dra-only")).nodes[0]
    assert node_labels(node)["nvidia.com/gpu.product"] == "NVIDIA-H200"


@pytest.mark.parametrize("change, expected", [
    ("    device_plugin: {enabled: true}\n",
     "12:5: pools[0].device_plugin.enabled: pool 'h200' enables the device plugin, which the GPU Operator's "
     "GPUCluster mode does not deploy (it manages the DRA driver, DCGM and dcgm-exporter only); "
     "set device_plugin.enabled: false"),
    ("", "12:5: pools[0].device_plugin.enabled: pool 'h200' enables the device plugin"),
], ids=["a pool that enables the device plugin", "a pool that leaves the device plugin at its default (on)"])
def test_gpucluster_mode_refuses_a_device_plugin_pool(tmp_path, change, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(GPUCLUSTER + change)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:")
    assert "pool 'h200' enables the device plugin" in str(info.value)
    assert "pools[0].device_plugin.enabled" in str(info.value)


def test_gpucluster_mode_needs_the_operator_present(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GPUCLUSTER.replace("present: true", "present: false") + "    device_plugin: {enabled: false}\n")
    with pytest.raises(ProfileError, match=r"operator\.mode: mode gpucluster needs present: true"):
        load_profile(path)


def test_gpucluster_is_served_and_no_cluster_policy(apiserver, api_client, core):
    custom = client.CustomObjectsApi(api_client)
    with running_agents(apiserver, api_client, "h200-gpucluster"):
        listed = custom.list_cluster_custom_object("nvidia.com", "v1alpha1", "gpuclusters")["items"]
        assert [(o["kind"], o["metadata"]["name"]) for o in listed] == [("GPUCluster", "gpu-cluster")]
        assert listed[0]["status"]["state"] == "ready"
        assert set(listed[0]["spec"]) == {"draDriver", "dcgm", "dcgmExporter"}
        crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition("gpuclusters.nvidia.com")
        assert (crd.spec.scope, crd.spec.names.kind) == ("Cluster", "GPUCluster")
        with pytest.raises(client.ApiException) as err:
            custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
        assert err.value.status == 404
        node = core.read_node("h200-0")
        assert not [k for k in node.metadata.labels if k.startswith("nvidia.com/")]
        assert "nvidia.com/gpu" not in node.status.allocatable
        assert core.list_config_map_for_all_namespaces(field_selector="metadata.name=default-mig-parted-config"
                                                      ).items == []
