"""Simulated cluster profiles: shipped profiles load and expand, faults change exactly the facts
their catalog entry documents, and every malformed profile is one clear error at file:line:col."""

from __future__ import annotations

import json
import re
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuconf.compat.rules import Mode
from gpuconf.errors import UsageError
from gpuconf.sim.profile import (
    FaultSpec,
    ProfileError,
    SimCluster,
    effective_mode,
    expand,
    expand_nodes,
    fault_catalog,
    fault_words,
    load_profile,
    shipped_profiles,
    with_faults,
)

DATA = Path(__file__).resolve().parents[2] / "gpuconf" / "data"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

REQUIRED_PROFILES = ["healthy-h100", "a100-mig-mixed", "t4-timeslicing", "h200-dra-only", "mixed-driver-570",
                     "multi-pool", "scale-1000"]
ISSUE_FAULTS = ["gpu-lost", "gpu-unhealthy", "label-drift", "driver-skew", "uvm-missing", "library-mismatch",
                "visible-devices-all", "envvar-leak", "no-runtimeclass", "toolkit-cdi-mode", "compat-libs-broken",
                "mig-layout-drift", "timeslice-replicas-wrong", "dra-attr-wrong", "dra-double-count",
                "nccl-slow-link", "nccl-hang", "plugin-not-registered", "xid-errors", "ecc-uncorrectable"]
SMALL = [p for p in shipped_profiles() if p != "scale-1000"]


# --- shipped profiles --------------------------------------------------------------------------


def test_every_required_profile_is_shipped():
    assert set(REQUIRED_PROFILES) <= set(shipped_profiles())


@pytest.mark.parametrize("name", shipped_profiles(), ids=[f"{n} loads, expands and has no faults"
                                                          for n in shipped_profiles()])
def test_shipped_profile_loads_and_expands(name):
    profile = load_profile(name)
    assert profile.name == name
    assert profile.source == f"gpuconf/data/sim_profiles/{name}.yaml"
    assert profile.faults == ()
    nodes = expand_nodes(profile)
    assert len(nodes) == profile.node_count == sum(p.count for p in profile.pools)
    assert sum(len(n.gpus) for n in nodes) == profile.gpu_count
    for pool in profile.pools:
        names = [n.name for n in nodes if n.pool.name == pool.name]
        assert names == [f"{pool.name}-{i}" for i in range(pool.count)]
    for node in nodes:
        assert [g.index for g in node.gpus] == list(range(node.pool.gpus_per_node))
        assert len({g.pci_bus_id for g in node.gpus}) == len(node.gpus)
        assert all(g.present and g.health == "Healthy" and not g.xids and g.ecc_uncorrected == 0 for g in node.gpus)
        assert node.driver == node.kernel_driver == node.pool.driver and node.uvm and node.device_plugin_registered
        assert node.faults == () and node.label_overrides == ()
        assert not node.unschedulable and node.taints == () and node.ready == "True" and node.tenant_pods == ()


@pytest.mark.parametrize("name", SMALL, ids=[f"{n}: GPU and MIG uuids are unique and stable across loads"
                                             for n in SMALL])
def test_uuids_unique_and_stable(name):
    first, second = expand_nodes(load_profile(name)), expand_nodes(load_profile(name))
    ids = [g.uuid for n in first for g in n.gpus] + [m.uuid for n in first for g in n.gpus for m in g.mig]
    assert len(ids) == len(set(ids))
    assert ids == [g.uuid for n in second for g in n.gpus] + [m.uuid for n in second for g in n.gpus for m in g.mig]
    for uid in ids:
        prefix, rest = uid.split("-", 1)
        assert prefix in ("GPU", "MIG") and UUID.match(rest), uid


def test_scale_1000_serves_8000_gpus_with_unique_uuids():
    profile = load_profile("scale-1000")
    nodes = expand_nodes(profile)
    assert (len(nodes), profile.gpu_count) == (1000, 8000)
    assert len({g.uuid for n in nodes for g in n.gpus}) == 8000
    assert nodes[-1].name == "h100-999"


def test_uuids_differ_between_profiles():
    a = {g.uuid for n in expand_nodes(load_profile("healthy-h100")) for g in n.gpus}
    b = {g.uuid for n in expand_nodes(load_profile("scale-1000")) for g in n.gpus}
    assert not a & b


def test_a100_mig_mixed_layout_expands_into_instances():
    nodes = expand_nodes(load_profile("a100-mig-mixed"))
    gpu0, gpu4 = nodes[0].gpus[0], nodes[0].gpus[4]
    assert [m.profile for m in gpu0.mig] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [m.gi for m in gpu0.mig] == [1, 2, 3, 4]
    assert [m.profile for m in gpu4.mig] == ["1g.10gb"] * 7
    per_node = [m.profile for g in nodes[0].gpus for m in g.mig]
    assert (per_node.count("1g.10gb"), per_node.count("2g.20gb"), per_node.count("3g.40gb")) == (36, 4, 4)


@pytest.mark.parametrize("name, pool, mode", [
    ("healthy-h100", "h100", Mode.LEGACY),
    ("t4-timeslicing", "t4", Mode.JIT_CDI),
    ("h200-dra-only", "h200", Mode.JIT_CDI),
    ("mixed-driver-570", "a100-570", Mode.LEGACY),
], ids=["toolkit 1.17 in auto mode runs legacy", "toolkit 1.18 in auto mode runs jit-cdi (T4)",
        "toolkit 1.18 in auto mode runs jit-cdi (H200)", "the 570 pool runs legacy"])
def test_effective_mode(name, pool, mode):
    p = load_profile(name).pool(pool)
    assert effective_mode(p.toolkit, p.device_plugin) is mode


def test_mixed_driver_pools_are_570_and_580():
    profile = load_profile("mixed-driver-570")
    assert sorted(p.driver.branch for p in profile.pools) == [570, 580]


def test_h200_dra_only_has_no_device_plugin():
    pool = load_profile("h200-dra-only").pools[0]
    assert pool.dra.enabled and not pool.device_plugin.enabled


def test_profile_loads_from_a_path():
    path = DATA / "sim_profiles" / "healthy-h100.yaml"
    profile = load_profile(path)
    assert profile.name == "healthy-h100" and profile.source == str(path)


# --- the fault catalog -------------------------------------------------------------------------


def catalog_doc() -> dict[str, Any]:
    with open(DATA / "faults.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_fault_catalog_matches_its_schema():
    with open(DATA / "schemas" / "faults.schema.json", encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    assert list(Draft202012Validator(schema).iter_errors(catalog_doc())) == []


def test_profile_schema_is_valid():
    with open(DATA / "schemas" / "sim_profile.schema.json", encoding="utf-8") as f:
        Draft202012Validator.check_schema(json.load(f))


def test_catalog_has_every_fault_the_issue_lists():
    assert set(ISSUE_FAULTS) <= set(fault_catalog())
    ids = [row["id"] for row in catalog_doc()["faults"]]
    assert len(ids) == len(set(ids))


def test_the_fleet_states_of_issue_25_are_not_tested_states():
    states = {f.id: f.severity for f in fault_catalog().values() if f.severity == "not-tested"}
    assert states == dict.fromkeys(["node-cordoned", "node-tainted", "node-not-ready", "gpus-busy",
                                  "toolkit-version-unreadable", "pod-traffic-blocked"], "not-tested")


FAULTS = sorted(fault_catalog().values(), key=lambda f: f.id)


@pytest.mark.parametrize("fault", FAULTS, ids=[f"{f.id} is caught by {f.check} in {f.suite}" for f in FAULTS])
def test_fault_names_its_check_and_suite(fault):
    from gpuconf.verdict import checks

    assert re.fullmatch(r"suites/test_[a-z]+\.py", fault.suite)
    if fault.check in checks():  # its suite has landed: the check catalog says where it lives
        assert fault.suite == checks()[fault.check].suite
    assert "\n" not in fault.summary and fault.sources
    assert fault.example_profile in shipped_profiles()


# --- each fault changes exactly the facts it documents ----------------------------------------


def diff(a: Any, b: Any, path: str) -> list[str]:
    """Paths of the facts that differ between two expansions (dataclasses and tuples of them)."""
    if a == b:
        return []
    if is_dataclass(a) and type(a) is type(b):
        out: list[str] = []
        for f in fields(a):
            out += diff(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}" if path else f.name)
        return out
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(is_dataclass(x) for x in a):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in diff(x, y, f"{path}[{i}]")]
    return [path]


def changed(before: SimCluster, after: SimCluster) -> dict[str, list[str]]:
    """Node name (or "cluster") -> changed fact paths, the provenance field left out."""
    out: dict[str, list[str]] = {}
    cluster = [f"cluster.{f.name}" for f in fields(before) if f.name not in ("profile", "nodes")
               and getattr(before, f.name) != getattr(after, f.name)]
    if cluster:
        out["cluster"] = cluster
    for x, y in zip(before.nodes, after.nodes, strict=True):
        paths = [p for p in diff(x, y, "") if p != "faults"]
        if paths:
            out[x.name] = paths
    return out


def covered(path: str, documented: str) -> bool:
    return path == documented or path.startswith((documented + ".", documented + "["))


@pytest.mark.parametrize("fault", FAULTS, ids=[f"{f.id} changes only {', '.join(f.alters)}" for f in FAULTS])
def test_fault_changes_exactly_what_it_documents(fault):
    profile = load_profile(fault.example_profile)
    faulty = with_faults(profile, [{"id": fault.id}])
    spec = faulty.faults[-1]
    got = changed(expand(profile), expand(faulty))
    documented = [a.replace("[gpu]", f"[{spec.gpu}]") for a in fault.alters]
    if fault.scope == "cluster":
        assert got == {"cluster": list(fault.alters)}
        return
    target = f"{spec.pool}-{spec.node}"
    assert list(got) == [target], "a fault with default targeting changes node 0 of the first pool only"
    assert all(any(covered(p, d) for d in documented) for p in got[target]), (got, documented)
    assert all(any(covered(p, d) for p in got[target]) for d in documented), (got, documented)
    node = expand(faulty).node(target)
    assert node.faults == (fault.id,)


@pytest.mark.parametrize("fault", [f for f in FAULTS if f.scope != "cluster"],
                         ids=[f"{f.id} with node: all changes every node of the pool" for f in FAULTS
                              if f.scope != "cluster"])
def test_fault_on_every_node(fault):
    profile = load_profile(fault.example_profile)
    faulty = with_faults(profile, [{"id": fault.id, "node": "all"}])
    pool = faulty.faults[-1].pool
    got = changed(expand(profile), expand(faulty))
    assert sorted(got) == sorted(n.name for n in expand_nodes(profile) if n.pool.name == pool)


@pytest.mark.parametrize("fault, words", [
    ({"id": "gpu-lost", "pool": "h100", "node": 1, "gpu": 3}, "gpu-lost on h100-1 GPU 3"),
    ({"id": "gpu-lost", "pool": "h100", "node": "all", "gpu": 2}, "gpu-lost on every node of pool h100, GPU 2"),
    ({"id": "driver-skew", "pool": "h100", "node": 1}, "driver-skew on h100-1"),
    ({"id": "driver-skew", "pool": "h100", "node": "all"}, "driver-skew on every node of pool h100"),
    ({"id": "no-runtimeclass"}, "no-runtimeclass (cluster-wide)"),
], ids=["a GPU of a node", "a GPU of every node", "a node", "every node of a pool", "the cluster"])
def test_the_reports_name_each_fault_where_the_profile_put_it(fault, words):
    profile = load_profile("healthy-h100")
    assert fault_words(profile) == ()  # a shipped healthy profile injects none
    assert fault_words(with_faults(profile, [fault])) == (words,)
    assert expand(with_faults(profile, [fault])).nodes[0].name == "h100-0"  # the names the cluster gives


def test_gpu_lost_targets_the_named_gpu():
    faulty = with_faults(load_profile("healthy-h100"), [{"id": "gpu-lost", "pool": "h100", "node": 1, "gpu": 3}])
    node = expand(faulty).node("h100-1")
    assert [g.index for g in node.present_gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert expand(faulty).node("h100-0").present_gpus == expand(faulty).node("h100-0").gpus


def test_faults_listed_in_a_profile_file_apply(tmp_path):
    text = (DATA / "sim_profiles" / "healthy-h100.yaml").read_text().replace(
        "faults: []", "faults:\n  - {id: gpu-lost, pool: h100, node: 0, gpu: 3}\n  - {id: uvm-missing, node: 1}\n")
    path = tmp_path / "faulty.yaml"
    path.write_text(text)
    nodes = expand_nodes(load_profile(path))
    assert not nodes[0].gpus[3].present and nodes[0].uvm
    assert nodes[1].gpus[3].present and not nodes[1].uvm


@pytest.mark.parametrize("fault, check", [
    ({"id": "driver-skew"}, lambda n: str(n.driver) == str(n.kernel_driver) == "570.211.01"),
    ({"id": "library-mismatch"}, lambda n: (str(n.driver), str(n.kernel_driver)) == ("580.159.03", "580.82.07")),
    ({"id": "label-drift", "label": "nvidia.com/gpu.count", "value": "4"},
     lambda n: n.label_overrides == (("nvidia.com/gpu.count", "4"),)),
    ({"id": "toolkit-cdi-mode"}, lambda n: n.mode is Mode.CDI),
    ({"id": "nccl-slow-link", "link": "nic", "factor": 0.25},
     lambda n: n.interconnect.nic_busbw_gbps == 47 * 0.25 and n.interconnect.busbw_gbps == 470),
    ({"id": "xid-errors", "gpu": 5, "xid": 79}, lambda n: n.gpus[5].xids == (79,)),
    ({"id": "ecc-uncorrectable", "gpu": 2, "count": 3}, lambda n: n.gpus[2].ecc_uncorrected == 3),
], ids=["driver-skew moves both driver layers to 570", "library-mismatch leaves the kernel module on 580.82.07",
        "label-drift can lie about the GPU count", "toolkit-cdi-mode switches the node to cdi",
        "nccl-slow-link can degrade the NIC instead of NVLink", "xid-errors records the Xid on the named GPU",
        "ecc-uncorrectable records the count on the named GPU"])
def test_fault_parameters(fault, check):
    node = expand(with_faults(load_profile("healthy-h100"), [fault])).node("h100-0")
    assert check(node)


def test_compat_libs_broken_pins_the_mode():
    faulty = with_faults(load_profile("mixed-driver-570"), [{"id": "compat-libs-broken"}])
    node = expand(faulty).node("a100-570-0")
    assert (node.toolkit.version, node.toolkit.mode, node.mode) == ("1.17.4", Mode.LEGACY, Mode.LEGACY)


def test_mig_layout_drift_default_loses_the_last_instance():
    faulty = with_faults(load_profile("a100-mig-mixed"), [{"id": "mig-layout-drift", "gpu": 4}])
    gpu = expand(faulty).node("a100-0").gpus[4]
    assert [m.profile for m in gpu.mig] == ["1g.10gb"] * 6
    assert faulty.faults[0].param("layout") == (("1g.10gb", 6),)


def test_timeslice_replicas_wrong_defaults_to_twice_the_config():
    faulty = with_faults(load_profile("t4-timeslicing"), [{"id": "timeslice-replicas-wrong"}])
    node = expand(faulty).node("t4-0")
    assert (node.device_plugin.sharing.replicas, node.pool.device_plugin.sharing.replicas) == (8, 4)


def test_with_faults_returns_a_copy():
    profile = load_profile("healthy-h100")
    faulty = with_faults(profile, [{"id": "nccl-hang"}])
    assert profile.faults == () and faulty.faults == (FaultSpec("nccl-hang", "h100", 0, None, ()),)
    assert with_faults(profile, []) == profile


def test_with_faults_accepts_fault_specs_from_another_profile():
    spec = with_faults(load_profile("healthy-h100"), [{"id": "driver-skew", "node": 1}]).faults[0]
    moved = with_faults(load_profile("scale-1000"), [spec])
    assert moved.faults == (spec,)
    assert str(expand(moved).node("h100-1").driver) == "570.211.01"


# --- malformed profiles: one ProfileError at file:line:col -------------------------------------

BASE = """\
schema: 1
name: bad
description: a profile with one thing wrong
pools:
  - name: h100
    count: 2
    gpu: H100
    gpus_per_node: 8
    driver: "580.95.05"
    toolkit: {version: "1.17.8"}
"""

KNOWN_GPUS = ("A10, A100, A100-80GB, A100-80GB-PCIE, A100-PCIE-40GB, A10G, A30, A40, B200, B300, GB200, GH200, "
              "GH200-144G-HBM3e, H100, H100-NVL, H100-PCIE, H200, H200-NVL, L4, L40S, RTX-3090, RTX-4090, RTX-5090, "
              "RTX-6000-ADA, RTX-A6000, RTX-PRO-6000-SE, T4, V100, V100-PCIE-16GB, V100-SXM2-16GB")

MALFORMED = [
    ("an unknown GPU model names the catalog's models", BASE.replace("gpu: H100", "gpu: H900"),
     f"7:10: pools[0].gpu: unknown GPU model 'H900' (known: {KNOWN_GPUS})"),
    ("a missing required field points at its mapping", BASE.replace('    driver: "580.95.05"\n', ""),
     "5:5: pools[0].driver: required field is missing"),
    ("an unknown field points at its key and lists the allowed ones",
     BASE.replace("    count: 2\n", "    count: 2\n    gpu_count: 8\n"),
     "7:5: pools[0].gpu_count: unknown field (allowed: name, count, gpu, gpus_per_node, driver, toolkit, "
     "device_plugin, dra, interconnect, labels)"),
    ("an unquoted version is a number, and the message says to quote it", BASE.replace('"580.95.05"', "580.95"),
     '9:13: pools[0].driver: expected a string, got a number (580.95) (quote versions: "580.95.05")'),
    ("a driver branch missing from driver_branches.yaml is rejected", BASE.replace('"580.95.05"', '"999.1.2"'),
     "9:13: pools[0].driver: driver branch 999 is not in gpuconf/data/driver_branches.yaml (known: 418, 450, 460, "
     "470, 495, 510, 515, 520, 525, 530, 535, 545, 550, 555, 560, 565, 570, 575, 580, 590, 595, 610, 615, 620)"),
    ("a MIG layout on a GPU that is not MIG-capable",
     BASE.replace("gpu: H100", "gpu: T4") + "    device_plugin: {mig: {strategy: mixed, layout: {1g.10gb: 1}}}\n",
     "11:52: pools[0].device_plugin.mig.layout: Tesla T4 is not MIG-capable"),
    ("a MIG profile the GPU does not have",
     BASE + "    device_plugin: {mig: {strategy: mixed, layout: {1g.5gb: 7}}}\n",
     "11:52: pools[0].device_plugin.mig.layout: NVIDIA H100 80GB HBM3 has no MIG profile '1g.5gb' (profiles: "
     "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"),
    ("more instances of a MIG profile than one GPU holds",
     BASE + "    device_plugin: {mig: {strategy: mixed, layout: {3g.40gb: 3}}}\n",
     "11:52: pools[0].device_plugin.mig.layout: NVIDIA H100 80GB HBM3 holds at most 2 x 3g.40gb, not 3"),
    ("a MIG layout needing more compute slices than the GPU has",
     BASE + "    device_plugin:\n      mig:\n        strategy: mixed\n        layout: {4g.40gb: 1, 3g.40gb: 1, "
            "1g.10gb: 1}\n",
     "14:17: pools[0].device_plugin.mig.layout: the layout needs 8 compute slices; NVIDIA H100 80GB HBM3 has 7"),
    ("a MIG layout needing more memory slices than the GPU has",
     BASE + "    device_plugin: {mig: {strategy: mixed, layout: {1g.20gb: 4, 1g.10gb: 1}}}\n",
     "11:52: pools[0].device_plugin.mig.layout: the layout needs 9 of the 8 memory slices of NVIDIA H100 80GB HBM3"),
    ("MIG strategy single with two profiles",
     BASE + "    device_plugin: {mig: {strategy: single, layout: {3g.40gb: 1, 1g.10gb: 2}}}\n",
     "11:53: pools[0].device_plugin.mig.layout: strategy single needs one MIG profile on every GPU; use mixed"),
    ("zero time-slicing replicas", BASE + "    device_plugin: {sharing: {strategy: time-slicing, replicas: 0}}\n",
     "11:65: pools[0].device_plugin.sharing.replicas: must be >= 1, not 0"),
    ("time-slicing without replicas", BASE + "    device_plugin: {sharing: {strategy: time-slicing}}\n",
     "11:30: pools[0].device_plugin.sharing: strategy time-slicing needs replicas (>= 1)"),
    ("a bad device list strategy", BASE + "    device_plugin: {device_list_strategy: mounts}\n",
     "11:43: pools[0].device_plugin.device_list_strategy: a string ('mounts') is not one of envvar, volume-mounts, "
     "cdi-annotations, cdi-cri, or a list of them"),
    ("DRA on Kubernetes before 1.34",
     BASE.replace("pools:", 'kubernetes: "1.33"\npools:') + "    device_plugin: {enabled: false}\n"
                                                             "    dra: {enabled: true}\n",
     "13:20: pools[0].dra.enabled: DRA (resource.k8s.io/v1) needs Kubernetes >= 1.34, the profile says 1.33"),
    ("a duplicate key names the first one's line", BASE.replace("    count: 2\n", "    count: 2\n    count: 3\n"),
     "7:5: pools[0].count: duplicate key (first on line 6)"),
    ("a YAML syntax error", BASE.replace("toolkit: {version", "toolkit: {version: [}"),
     "10:25: (yaml): invalid YAML: expected the node content, but found '}'"),
    ("an empty file", "", "1:1: empty file: a profile is a mapping with schema, name, pools"),
    ("a list instead of a mapping", "- a\n", "1:1: (top level): expected a mapping, got a list"),
    ("two pools with one name",
     BASE + "  - {name: h100, count: 1, gpu: T4, gpus_per_node: 1, driver: \"580.95.05\", "
            "toolkit: {version: 1.17.8}}\n",
     "11:12: pools[1].name: duplicate pool name 'h100'"),
    # faults
    ("an unknown fault lists the catalog", BASE + "faults:\n  - {id: gpu-melted}\n",
     "12:10: faults[0].id: unknown fault 'gpu-melted' (known: " + ", ".join(sorted(fault_catalog())) + ")"),
    ("a fault on a pool that does not exist", BASE + "faults:\n  - {id: gpu-lost, pool: a100}\n",
     "12:26: faults[0].pool: no pool named 'a100' (pools: h100)"),
    ("a fault on a node that does not exist", BASE + "faults:\n  - {id: gpu-lost, pool: h100, node: 2, gpu: 3}\n",
     "12:38: faults[0].node: 2 is not a node of pool 'h100' (0-1, or \"all\")"),
    ("a fault on a GPU that does not exist", BASE + "faults:\n  - {id: gpu-lost, gpu: 8}\n",
     "12:25: faults[0].gpu: 8 is not a GPU of pool 'h100' (0-7)"),
    ("a fault whose pool lacks what it needs", BASE + "faults:\n  - {id: mig-layout-drift}\n",
     "12:10: faults[0].id: mig-layout-drift needs mig: pool 'h100' has no MIG layout"),
    ("a driver skew to the pool's own driver", BASE + 'faults:\n  - {id: driver-skew, driver: "580.95.05"}\n',
     "12:31: faults[0].driver: the pool already runs 580.95.05: a skew needs another version"),
    ("a GPU index on a node-scope fault", BASE + "faults:\n  - {id: uvm-missing, gpu: 1}\n",
     "12:23: faults[0].gpu: uvm-missing is a node-scope fault: it takes no gpu"),
    ("an unknown fault parameter", BASE + "faults:\n  - {id: uvm-missing, colour: red}\n",
     "12:23: faults[0].colour: unknown parameter for uvm-missing (parameters: pool, node)"),
    ("a fault parameter of the wrong type", BASE + "faults:\n  - {id: xid-errors, xid: seventy-nine}\n",
     "12:27: faults[0].xid: expected an integer, got a string ('seventy-nine')"),
    ("a node that is neither an index nor all", BASE + "faults:\n  - {id: gpu-lost, node: first}\n",
     "12:26: faults[0].node: a string ('first') is not a node index (0, 1, ...) or \"all\""),
    ("a compat-libs-broken toolkit that still selects compat libs",
     BASE + 'faults:\n  - {id: compat-libs-broken, toolkit_version: "1.17.8"}\n',
     "12:47: faults[0].toolkit_version: toolkit 1.17.8 still selects cuda-compat in legacy mode (rule 'newer'); "
     "pick one whose rule is 'none'"),
    ("a mixed-gpu-models model the catalog does not know",
     BASE + 'faults:\n  - {id: mixed-gpu-models, gpu: 1, model: "Quadro X"}\n',
     "12:43: faults[0].model: unknown GPU model 'Quadro X' (gpuconf/data/gpus.yaml)"),
    ("a mixed-gpu-models model that is the pool's own",
     BASE + 'faults:\n  - {id: mixed-gpu-models, gpu: 1, model: "NVIDIA H100 80GB HBM3"}\n',
     "12:43: faults[0].model: is the pool's own model NVIDIA H100 80GB HBM3: nothing is mixed"),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in MALFORMED], ids=[i for i, _, _ in MALFORMED])
def test_malformed_profile_is_one_error_at_file_line_col(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value) == f"{path}:{expected}"
    assert info.value.file == str(path) and info.value.line == int(expected.split(":")[0])


def test_profile_error_is_a_usage_error():
    assert issubclass(ProfileError, UsageError)


def test_unknown_profile_name_lists_the_shipped_ones():
    with pytest.raises(ProfileError) as info:
        load_profile("healthy-h900")
    assert str(info.value) == ("gpuconf/data/sim_profiles/healthy-h900.yaml: unknown simulated cluster profile "
                               f"'healthy-h900' (shipped: {', '.join(shipped_profiles())})")


def test_missing_profile_file(tmp_path):
    with pytest.raises(ProfileError, match=r"nope\.yaml: no such profile file \(a bare name loads a shipped "
                                           r"profile: a100-mig-dra, a100-mig-mixed, "):
        load_profile(tmp_path / "nope.yaml")


@pytest.mark.parametrize("fault, expected", [
    ({"id": "gpu-lost", "pool": "a100"}, "faults[0].pool: no pool named 'a100' (pools: h100)"),
    ({"id": "dra-attr-wrong"}, "faults[0].id: dra-attr-wrong needs dra: pool 'h100' has no DRA driver"),
    ({"id": "library-mismatch", "kernel_driver": "580.159.03"},
     "faults[0].kernel_driver: equals the pool's driver 580.159.03: no mismatch"),
    ({"id": "label-drift", "value": "NVIDIA-H100-80GB-HBM3"},
     "faults[0].value: equals the real product label 'NVIDIA-H100-80GB-HBM3'"),
    ({"id": "nccl-slow-link", "factor": 1.5}, "faults[0].factor: must be between 0 and 1 (exclusive), not 1.5"),
    ({"id": "no-runtimeclass", "pool": "h100"}, "faults[0].pool: no-runtimeclass is a cluster-scope fault: it "
                                                "takes no pool"),
], ids=["with_faults: unknown pool", "with_faults: a DRA fault on a pool without DRA",
        "with_faults: a library mismatch with the same version", "with_faults: a label drift to the real value",
        "with_faults: a slow-link factor above 1", "with_faults: a pool on a cluster-scope fault"])
def test_with_faults_errors(fault, expected):
    with pytest.raises(ProfileError) as info:
        with_faults(load_profile("healthy-h100"), [fault])
    assert str(info.value) == f"with_faults(healthy-h100): {expected}"


@pytest.mark.parametrize("profile, fault, expected", [
    ("h200-dra-only", {"id": "gpus-busy"}, "faults[0].id: gpus-busy needs device-plugin: pool 'h200' has no device "
                                           "plugin"),
    ("a100-mig-mixed", {"id": "gpus-busy"}, "faults[0].id: pool: pool 'a100' advertises MIG instances as "
                                            "nvidia.com/mig-<profile> (strategy mixed): a tenant holding "
                                            "nvidia.com/gpu is not simulated there"),
    ("healthy-h100", {"id": "gpus-busy", "gpus": 0}, "faults[0].gpus: must be >= 1 (leave it out for every GPU of "
                                                     "the node)"),
    ("healthy-h100", {"id": "node-not-ready", "status": "True"}, "faults[0].status: 'True' is not one of Unknown, "
                                                                 "False"),
    ("healthy-h100", {"id": "node-tainted", "effect": "NoWay"}, "faults[0].effect: 'NoWay' is not one of "
                                                                "NoSchedule, PreferNoSchedule, NoExecute"),
], ids=["gpus-busy on a DRA-only pool: the tenant needs the device plugin",
        "gpus-busy on a MIG mixed pool: no nvidia.com/gpu to hold", "gpus-busy holding no GPU",
        "node-not-ready with Ready True", "node-tainted with an effect Kubernetes has not"])
def test_fleet_state_errors(profile, fault, expected):
    with pytest.raises(ProfileError) as info:
        with_faults(load_profile(profile), [fault])
    assert str(info.value) == f"with_faults({profile}): {expected}"


def test_fleet_states_take_their_parameters():
    faulty = with_faults(load_profile("healthy-h100"), [
        {"id": "node-tainted", "node": 1, "key": "nvidia.com/gpu", "value": "", "effect": "NoExecute"},
        {"id": "node-not-ready", "node": 1, "status": "False", "since_s": 30},
        {"id": "gpus-busy", "gpus": 2, "duration_s": 60}])
    busy, down = expand(faulty).nodes
    assert down.taints == (("nvidia.com/gpu", "", "NoExecute"),) and (down.ready, down.ready_since_s) == ("False", 30)
    (tenant,) = busy.tenant_pods
    assert (tenant.namespace, tenant.name, tenant.gpus, tenant.duration_s) == ("tenant-a", "train-h100-0-0", 2, 60)


def test_no_runtimeclass_needs_a_runtimeclass(tmp_path):
    path = tmp_path / "no-rc.yaml"
    path.write_text(BASE.replace("pools:", "runtime_classes: []\npools:"))
    with pytest.raises(ProfileError, match=r"no-runtimeclass needs nvidia-runtimeclass: the profile has no "
                                           r"RuntimeClass named nvidia to remove"):
        with_faults(load_profile(path), [{"id": "no-runtimeclass"}])


def test_a_path_may_carry_any_name(tmp_path):
    path = tmp_path / "other-name.yaml"
    path.write_text(BASE)
    assert load_profile(path).name == "bad"


def test_a_shipped_profile_is_named_after_its_file(tmp_path, monkeypatch):
    (tmp_path / "other-name.yaml").write_text(BASE)
    monkeypatch.setattr("gpuconf.sim.profile._profile_dir", lambda: tmp_path)
    with pytest.raises(ProfileError) as info:
        load_profile("other-name")
    assert str(info.value) == ("gpuconf/data/sim_profiles/other-name.yaml:2:7: name: profile name 'bad' differs "
                               "from its file name 'other-name'")
