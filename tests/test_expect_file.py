"""The --expect file (gpuconf/expect.py): the examples load and describe the simulated profiles they
name, selectors decide one pool per node, and every malformed file is one error at file:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from gpuconf.compat import tables
from gpuconf.expect import ExpectError, ExpectPool, NodeCount, load_expect
from gpuconf.sim.profile import load_profile
from gpuconf.yamlschema import schema

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "expect"


# --- the examples ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["healthy-h100", "mixed-driver-570"])
def test_each_example_declares_every_pool_of_the_simulated_profile_it_names(name):
    """The example for a simulated profile agrees with that profile's pools, field by field."""
    expect = load_expect(EXAMPLES / f"{name}.yaml")
    sim = load_profile(name)
    assert expect.name == name
    assert [p.name for p in expect.pools] == [p.name for p in sim.pools]
    for declared, pool in zip(expect.pools, sim.pools, strict=True):
        assert declared.nodes.admits(pool.count)
        assert declared.gpu.product == pool.gpu.gfd_product
        assert declared.gpu.count == pool.gpus_per_node
        assert declared.gpu.memory_mib == pool.gpu.memory_mib
        assert declared.driver.branch in (None, pool.driver.branch)
        assert declared.driver.version in (None, str(pool.driver))
        assert declared.cuda.driver_version == str(tables.native_cuda(pool.driver))
        # none declares "no MIG in use", which a plugin configured single or mixed meets on GPUs without MIG
        assert declared.mig.strategy == pool.device_plugin.mig.strategy or (
            declared.mig.strategy == "none" and not pool.device_plugin.mig.enabled)
        assert declared.sharing.strategy == pool.device_plugin.sharing.strategy


def test_every_example_file_loads():
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files
    for path in files:
        assert load_expect(path).pools, path


def test_the_healthy_example_as_loaded():
    pool = load_expect(EXAMPLES / "healthy-h100.yaml").pool("h100")
    assert pool.selector == (("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),)
    assert pool.nodes == NodeCount(exact=2)
    assert pool.declared() == [
        ("gpu.product", "NVIDIA-H100-80GB-HBM3"), ("gpu.count", "8"), ("gpu.memory_mib", "81559"),
        ("driver.version", "580.159.03"), ("cuda.driver_version", "13.0"), ("mig.strategy", "none"),
        ("sharing.strategy", "none"), ("sharing.replicas", "1"), ("runtime.mode", "legacy"),
        ("nccl.busbw_floor_gbps", "460")]


def test_the_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(schema("expect"))


# --- pools and selectors --------------------------------------------------------------------------

NESTED = """\
schema: 1
pools:
  - name: h100
    selector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  - name: h100-rack-7
    selector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, topology.kubernetes.io/zone: rack-7}
    nodes: {min: 0}
  - name: t4
    selector: {nvidia.com/gpu.product: Tesla-T4-SHARED}
"""

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "kubernetes.io/os": "linux"}


@pytest.mark.parametrize("labels, pool", [
    (H100, "h100"),
    (H100 | {"topology.kubernetes.io/zone": "rack-7"}, "h100-rack-7"),
    (H100 | {"topology.kubernetes.io/zone": "rack-8"}, "h100"),
    ({"nvidia.com/gpu.product": "Tesla-T4-SHARED"}, "t4"),
    ({"nvidia.com/gpu.product": "Tesla-T4"}, None),
    ({}, None),
], ids=["a node matching one selector belongs to that pool",
        "a node matching nested selectors belongs to the more specific pool",
        "a label with another value does not match",
        "selectors match labels exactly, GFD's -SHARED suffix included",
        "a node labelled otherwise belongs to no pool",
        "a node without labels belongs to no pool"])
def test_pool_for(tmp_path, labels, pool):
    path = tmp_path / "nested.yaml"
    path.write_text(NESTED)
    found = load_expect(path).pool_for(labels)
    assert (found.name if found else None) == pool


def test_node_counts():
    assert NodeCount(exact=2).admits(2) and not NodeCount(exact=2).admits(3)
    assert NodeCount(min=2).admits(5) and not NodeCount(min=2).admits(1)
    assert NodeCount().admits(1) and not NodeCount().admits(0)  # a declared pool exists
    assert str(NodeCount(exact=2)) == "exactly 2" and str(NodeCount(min=0)) == "at least 0"


def test_a_pool_declaring_only_a_selector_declares_no_fields():
    assert ExpectPool("p", (("a", "b"),)).declared() == []


# --- malformed files: one ExpectError at file:line:col ------------------------------------------------

BASE = """\
schema: 1
pools:
  - name: h100
    selector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    nodes: 2
    gpu: {product: NVIDIA-H100-80GB-HBM3, count: 8}
    driver: {version: "580.95.05"}
"""

SELECTOR = "{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}"
OVERLAP_ADVICE = ("make one selector include all of the other's labels, or give them a label with different "
                  "values")

MALFORMED = [
    ("a YAML syntax error", BASE.replace("{product: NVIDIA", "{product: [NVIDIA"),
     "6:52: (yaml): invalid YAML: expected ',' or ']', but got '}'"),
    ("an unknown field in a pool lists the allowed ones", BASE + "    gpus: 8\n",
     "8:5: pools[0].gpus: unknown field (allowed: name, selector, nodes, gpu, driver, cuda, mig, sharing, runtime, "
     "nccl, pcie)"),
    ("an unknown top-level field", BASE.replace("schema: 1\n", "schema: 1\nowner: me\n"),
     "2:1: owner: unknown field (allowed: schema, name, description, pools)"),
    ("a node count of the wrong type", BASE.replace("nodes: 2", "nodes: two"),
     "5:12: pools[0].nodes: a string ('two') is not an exact node count (2) or {min: N}"),
    ("a negative node count", BASE.replace("nodes: 2", "nodes: -1"),
     "5:12: pools[0].nodes: must be >= 0, not -1"),
    ("a negative minimum node count", BASE.replace("nodes: 2", "nodes: {min: -1}"),
     "5:18: pools[0].nodes.min: must be >= 0, not -1"),
    ("a node count with max instead of min", BASE.replace("nodes: 2", "nodes: {max: 3}"),
     "5:13: pools[0].nodes.max: unknown field (allowed: min)"),
    ("a MIG strategy that does not exist", BASE + "    mig: {strategy: dynamic}\n",
     "8:21: pools[0].mig.strategy: 'dynamic' is not one of none, single, mixed"),
    ("a pool without a selector", BASE.replace(f"    selector: {SELECTOR}\n", ""),
     "3:5: pools[0].selector: required field is missing"),
    ("an empty selector", BASE.replace(SELECTOR, "{}"), "4:15: pools[0].selector: must not be empty"),
    ("a selector value that is a number", BASE.replace(SELECTOR, "{nvidia.com/gpu.count: 8}"),
     '4:38: pools[0].selector.nvidia.com/gpu.count: expected a string, got an integer (8) (quote it: "8")'),
    ("a selector key that is not a label key", BASE.replace("{nvidia.com/gpu.product: NVIDIA", "{gpu product: NVIDIA"),
     "4:16: pools[0].selector.gpu product: 'gpu product' is not a label key such as nvidia.com/gpu.product"),
    ("a product with spaces says how GFD writes it",
     BASE.replace("product: NVIDIA-H100-80GB-HBM3}", "product: NVIDIA H100 80GB HBM3}"),
     "4:40: pools[0].selector.nvidia.com/gpu.product: 'NVIDIA H100 80GB HBM3' is not a label value (letters, "
     "digits, '-', '_', '.'; GFD writes spaces as '-': NVIDIA-H100-80GB-HBM3)"),
    ("an unquoted driver version", BASE.replace('"580.95.05"', "580.95"),
     '7:23: pools[0].driver.version: expected a string, got a number (580.95) (quote it: "580.95")'),
    ("a CUDA version without its minor", BASE + '    cuda: {driver_version: "13"}\n',
     "8:28: pools[0].cuda.driver_version: '13' is not a CUDA major.minor such as 13.0"),
    ("a CUDA version the declared driver does not run natively", BASE + '    cuda: {driver_version: "12.8"}\n',
     "8:28: pools[0].cuda.driver_version: driver branch 580 runs CUDA 13.0 natively "
     "(gpuconf/data/driver_branches.yaml), not 12.8"),
    ("a driver branch that disagrees with the version",
     BASE.replace('{version: "580.95.05"}', '{version: "580.95.05", branch: 570}'),
     "7:44: pools[0].driver.branch: driver 580.95.05 is on branch 580, not 570"),
    ("a driver that declares nothing", BASE.replace('{version: "580.95.05"}', "{}"),
     "7:13: pools[0].driver: must declare at least one of: version, branch"),
    ("zero GPUs per node", BASE.replace("count: 8", "count: 0"), "6:50: pools[0].gpu.count: must be >= 1, not 0"),
    ("a boolean GPU count", BASE.replace("count: 8", "count: true"),
     "6:50: pools[0].gpu.count: expected an integer, got a boolean (True)"),
    ("two pools with one name", BASE + "  - {name: h100, selector: {nvidia.com/gpu.product: NVIDIA-H200}}\n",
     "8:12: pools[1].name: duplicate pool name 'h100' (first at line 3)"),
    ("two pools with the same selector", BASE + f"  - {{name: h100-b, selector: {SELECTOR}}}\n",
     "8:30: pools[1].selector: the same selector as pool 'h100' (line 3): a node labelled "
     f"nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 would match both; {OVERLAP_ADVICE}"),
    ("two selectors on different labels overlap",
     BASE + "  - {name: rack-7, selector: {topology.kubernetes.io/zone: rack-7}}\n",
     "8:30: pools[1].selector: overlaps pool 'h100' (line 3): a node labelled nvidia.com/gpu.product="
     f"NVIDIA-H100-80GB-HBM3, topology.kubernetes.io/zone=rack-7 would match both; {OVERLAP_ADVICE}"),
    ("a MIG layout with strategy none", BASE + "    mig: {strategy: none, layout: {1g.10gb: 7}}\n",
     "8:35: pools[0].mig.layout: a MIG layout needs strategy single or mixed"),
    ("MIG strategy single with two profiles", BASE + "    mig: {strategy: single, layout: {1g.10gb: 3, 2g.20gb: 2}}\n",
     "8:37: pools[0].mig.layout: strategy single needs one MIG profile on every GPU; use mixed"),
    ("a MIG profile the declared GPU does not have", BASE + "    mig: {strategy: mixed, layout: {1g.5gb: 7}}\n",
     "8:37: pools[0].mig.layout.1g.5gb: NVIDIA H100 80GB HBM3 has no MIG profile '1g.5gb' (profiles: 1g.10gb, "
     "1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"),
    ("more instances of a MIG profile than one GPU holds", BASE + "    mig: {strategy: mixed, layout: {3g.40gb: 3}}\n",
     "8:46: pools[0].mig.layout.3g.40gb: NVIDIA H100 80GB HBM3 holds at most 2 x 3g.40gb, not 3"),
    ("a MIG layout key that is not a profile", BASE + "    mig: {strategy: mixed, layout: {big: 1}}\n",
     "8:37: pools[0].mig.layout.big: 'big' is not a MIG profile such as 1g.10gb"),
    ("MIG on a GPU that is not MIG-capable",
     BASE.replace("NVIDIA-H100-80GB-HBM3, count", "Tesla-T4, count") + "    mig: {strategy: mixed}\n",
     "8:21: pools[0].mig.strategy: Tesla T4 is not MIG-capable"),
    ("replicas without sharing", BASE + "    sharing: {strategy: none, replicas: 4}\n",
     "8:41: pools[0].sharing.replicas: replicas needs strategy time-slicing or mps"),
    ("sharing without a strategy", BASE + "    sharing: {replicas: 4}\n",
     "8:14: pools[0].sharing.strategy: required field is missing"),
    ("a product with GFD's -SHARED suffix",
     BASE.replace("{product: NVIDIA-H100-80GB-HBM3,", "{product: NVIDIA-H100-80GB-HBM3-SHARED,"),
     "6:20: pools[0].gpu.product: declare the GPU itself (NVIDIA-H100-80GB-HBM3); GFD's -SHARED suffix is checked "
     "through sharing"),
    ("runtime mode auto (declare what it resolves to)", BASE + "    runtime: {mode: auto}\n",
     "8:21: pools[0].runtime.mode: 'auto' is not one of legacy, cdi, jit-cdi"),
    ("a zero NCCL floor", BASE + "    nccl: {busbw_floor_gbps: 0}\n",
     "8:30: pools[0].nccl.busbw_floor_gbps: must be > 0, not 0"),
    ("another schema version", BASE.replace("schema: 1", "schema: 2"), "1:9: schema: must be 1, not 2"),
    ("no schema version", BASE.replace("schema: 1\n", ""), "1:1: schema: required field is missing"),
    ("an empty file", "", "1:1: empty file: an --expect file is a mapping with schema: 1 and pools"),
    ("a list instead of a mapping", "- a\n", "1:1: (top level): expected a mapping, got a list"),
    ("a duplicate key names the first one's line", BASE.replace("    nodes: 2\n", "    nodes: 2\n    nodes: 3\n"),
     "6:5: pools[0].nodes: duplicate key (first on line 5)"),
    ("no pools", "schema: 1\npools: []\n", "2:8: pools: must not be empty"),
    ("a gpu section that declares nothing", BASE.replace("gpu: {product: NVIDIA-H100-80GB-HBM3, count: 8}", "gpu: {}"),
     "6:10: pools[0].gpu: must declare at least one of: product, count, memory_mib, unhealthy_max"),
    ("a pool name that is not a lower-case name", BASE.replace("name: h100", "name: H100_pool"),
     "3:11: pools[0].name: 'H100_pool' is not a lower-case name such as h100 or a100-mig"),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in MALFORMED], ids=[i for i, _, _ in MALFORMED])
def test_malformed_file_is_one_error_at_file_line_col(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ExpectError) as info:
        load_expect(path)
    assert str(info.value) == f"{path}:{expected}"
    assert "\n" not in str(info.value)
    line, column = (int(x) for x in expected.split(":")[:2])
    assert (info.value.file, info.value.line, info.value.column) == (str(path), line, column)


def test_the_base_of_the_malformed_cases_is_well_formed(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(BASE)
    assert load_expect(path).pool("h100").gpu.count == 8


def test_a_missing_file_cannot_be_read(tmp_path):
    with pytest.raises(ExpectError) as info:
        load_expect(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory"
    assert info.value.line is None


def test_a_directory_cannot_be_read(tmp_path):
    with pytest.raises(ExpectError, match=r": cannot read: Is a directory$"):
        load_expect(tmp_path)


def test_a_file_that_is_not_utf8_cannot_be_read(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"schema: 1\nname: caf\xe9\n")
    with pytest.raises(ExpectError, match=r"latin1\.yaml: cannot read: not UTF-8 text \(invalid continuation byte"):
        load_expect(path)


def test_expect_error_is_an_exception_and_the_path_may_be_a_string(tmp_path):
    assert issubclass(ExpectError, Exception)
    path = tmp_path / "good.yaml"
    path.write_text(BASE)
    assert load_expect(str(path)).source == str(path)


def test_a_pool_declares_its_nics_for_the_inter_node_nccl_floor(tmp_path):
    path = tmp_path / "nics.yaml"
    path.write_text(BASE + "    nccl: {nic_gbps: 400, nics: 8, busbw_floor_gbps: 460}\n")
    nccl = load_expect(path).pools[0].nccl
    assert (nccl.nic_gbps, nccl.nics, nccl.busbw_floor_gbps) == (400, 8, 460.0)
    path.write_text(BASE + "    nccl: {nics: 8}\n")
    with pytest.raises(ExpectError) as info:
        load_expect(path)
    assert str(info.value) == f"{path}:8:11: pools[0].nccl: 'nic_gbps' is a dependency of 'nics'"


def test_a_pool_declares_its_pcie_link_for_the_bandwidth_checks(tmp_path):
    path = tmp_path / "pcie.yaml"
    path.write_text(BASE + "    pcie: {gen: 4, width: 16}\n")
    pcie = load_expect(path).pools[0].pcie
    assert pcie is not None and (pcie.gen, pcie.width) == (4, 16)
    path.write_text(BASE)
    assert load_expect(path).pools[0].pcie is None
    path.write_text(BASE + "    pcie: {gen: 5, width: 12}\n")
    with pytest.raises(ExpectError) as info:
        load_expect(path)
    assert str(info.value).startswith(f"{path}:8:") and "pools[0].pcie.width" in str(info.value)
