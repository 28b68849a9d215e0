"""The data tables in gpuconf/data: each matches its JSON Schema and the invariants that tie the
tables together (branches, toolkits, forward compatibility, brands, GPUs, MIG, images)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

DATA = Path(__file__).resolve().parent.parent / "gpuconf" / "data"
SCHEMAS = DATA / "schemas"

TABLES = [
    "driver_branches",
    "toolkits",
    "forward_compat",
    "nvml_brands",
    "gpus",
    "mig_profiles",
    "nccl_floors",
    "cuda_images",
    "cncf_requirements",
    "health_thresholds",
    "xid_codes",
    "dcgm_diag",
    "host_bandwidth",
    "nvml_errors",
    "security_advisories",
]


@cache
def load(name: str) -> dict:
    with open(DATA / f"{name}.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)


@cache
def schema(name: str) -> dict:
    with open(SCHEMAS / f"{name}.schema.json", encoding="utf-8") as f:
        return json.load(f)


def mm(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def branches() -> dict[int, dict]:
    return {row["branch"]: row for row in load("driver_branches")["branches"]}


def reconstruct(image: dict, brand_orders: dict[str, list[str]]) -> str:
    """NVIDIA_REQUIRE_CUDA rebuilt by the rule of research/require-cuda.md §9."""
    terms = [image["head"]]
    for n in image["branches"]:
        for b in brand_orders[image["brand_order"]]:
            terms.append(f"brand={b},driver>={n},driver<{n + 1}")
    return " ".join(terms)


# --- every table -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES, ids=[f"{t}.yaml is valid UTF-8 YAML with schema 1" for t in TABLES])
def test_table_loads(name):
    raw = (DATA / f"{name}.yaml").read_bytes()
    raw.decode("utf-8")
    doc = load(name)
    assert doc["schema"] == 1
    assert doc["updated"] in ("2026-11-29", "2026-12-01", "2026-12-04")
    assert doc["sources"], "every table names its sources"


@pytest.mark.parametrize(
    "name", TABLES, ids=[f"{t}.schema.json is a valid draft 2020-12 schema" for t in TABLES]
)
def test_schema_is_valid(name):
    Draft202012Validator.check_schema(schema(name))


@pytest.mark.parametrize("name", TABLES, ids=[f"{t}.yaml matches {t}.schema.json" for t in TABLES])
def test_table_matches_schema(name):
    validator = Draft202012Validator(schema(name))
    errors = sorted(validator.iter_errors(load(name)), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("name", TABLES, ids=[f"{t}.yaml: every unconfirmed row says why" for t in TABLES])
def test_unconfirmed_rows_have_notes(name):
    def rows(node):
        if isinstance(node, dict):
            if node.get("confirmed") is False:
                yield node
            for v in node.values():
                yield from rows(v)
        elif isinstance(node, list):
            for v in node:
                yield from rows(v)

    for row in rows(load(name)):
        assert row.get("note"), row


def test_a_row_that_is_not_confirmed_and_has_no_note_is_rejected_by_the_schema():
    bad = dict(load("driver_branches"))
    bad["branches"] = [
        {
            "branch": 999,
            "cuda": "99.0",
            "first_release": None,
            "kind": "lts",
            "forward_compat": False,
            "confirmed": False,
        }
    ]
    assert list(Draft202012Validator(schema("driver_branches")).iter_errors(bad))


# --- driver branches -------------------------------------------------------------------------


def test_driver_branches_are_unique():
    nums = [row["branch"] for row in load("driver_branches")["branches"]]
    assert len(nums) == len(set(nums))


def test_native_cuda_never_decreases_as_the_branch_number_grows():
    rows = sorted(load("driver_branches")["branches"], key=lambda r: r["branch"])
    for prev, cur in zip(rows, rows[1:], strict=False):
        assert mm(prev["cuda"]) <= mm(cur["cuda"]), (prev["branch"], cur["branch"])


def test_driver_branches_cover_the_required_branches():
    required = {
        418,
        450,
        460,
        470,
        495,
        510,
        515,
        520,
        525,
        530,
        535,
        545,
        550,
        555,
        560,
        565,
        570,
        575,
        580,
        590,
    }
    assert required <= set(branches())


def test_driver_branches_have_the_known_native_cuda_versions():
    known = {
        470: "11.4",
        525: "12.0",
        535: "12.2",
        545: "12.3",
        550: "12.4",
        555: "12.5",
        560: "12.6",
        565: "12.7",
        570: "12.8",
        575: "12.9",
        580: "13.0",
        590: "13.1",
    }
    table = branches()
    assert {b: table[b]["cuda"] for b in known} == known


def test_first_release_of_a_branch_belongs_to_that_branch():
    for n, row in branches().items():
        if row["first_release"] is not None:
            assert row["first_release"].split(".")[0] == str(n)


# --- toolkits --------------------------------------------------------------------------------


def test_toolkit_versions_are_unique_and_cover_11_0_to_13():
    versions = [t["cuda"] for t in load("toolkits")["toolkits"]]
    assert len(versions) == len(set(versions))
    minors = {v.rsplit(".", 1)[0] for v in versions}
    for m in ["11.0", "11.8", "12.0", "12.8", "12.9", "13.0", "13.1", "13.2"]:
        assert m in minors


def test_toolkit_label_names_the_same_major_minor_as_the_version():
    for t in load("toolkits")["toolkits"]:
        major, minor, _ = t["cuda"].split(".")
        assert t["label"].startswith(f"CUDA {major}.{minor}"), t


def test_toolkit_driver_belongs_to_the_branch_whose_native_cuda_is_the_toolkits_major_minor():
    table = branches()
    checked = 0
    for t in load("toolkits")["toolkits"]:
        if t["min_driver"] is None:
            continue
        branch = int(t["min_driver"].split(".")[0])
        if branch in table:
            assert table[branch]["cuda"] == t["cuda"].rsplit(".", 1)[0], t
            checked += 1
    assert checked > 30


def test_minor_version_baselines_are_the_documented_drivers():
    doc = load("toolkits")
    assert doc["baselines"] == {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}
    ga = {t["cuda"]: t["min_driver"] for t in doc["toolkits"]}
    assert ga["12.0.0"] == doc["baselines"]["12"]
    assert ga["13.0.0"] == doc["baselines"]["13"]


def test_the_driver_nvidia_pairs_with_12_8_ga_is_570_26_as_printed():
    ga = {t["cuda"]: t for t in load("toolkits")["toolkits"]}
    assert ga["12.8.0"]["min_driver"] == "570.26"
    assert ga["12.8.0"]["label"] == "CUDA 12.8 GA"


# --- forward compatibility -------------------------------------------------------------------


def test_forward_compat_is_for_data_center_gpus_only():
    doc = load("forward_compat")
    assert doc["gpu_classes"] == ["data-center"]
    assert "Data Center" in doc["note"]


def test_forward_compat_hosts_are_known_branches_marked_forward_compat():
    table = branches()
    for row in load("forward_compat")["compat"]:
        for n in row["host_branches"]:
            assert n in table, (row["cuda_major_minor"], n)
            assert table[n]["forward_compat"], (row["cuda_major_minor"], n)


def test_every_branch_marked_forward_compat_hosts_some_compat_package():
    hosts = {n for row in load("forward_compat")["compat"] for n in row["host_branches"]}
    marked = {n for n, row in branches().items() if row["forward_compat"]}
    assert marked == hosts


def test_a_compat_package_only_runs_on_branches_older_than_its_own():
    table = branches()
    for row in load("forward_compat")["compat"]:
        for n in row["host_branches"]:
            assert mm(table[n]["cuda"]) < mm(row["cuda_major_minor"]), (row, n)
        if "built_from_branch" in row:
            assert table[row["built_from_branch"]]["cuda"] == row["cuda_major_minor"], row


def test_cuda_13_compat_packages_are_supported_on_r535_and_r570():
    by = {row["cuda_major_minor"]: row["host_branches"] for row in load("forward_compat")["compat"]}
    for v in ["13.0", "13.1", "13.2", "13.3", "13.4"]:
        assert {535, 570} <= set(by[v])


# --- NVML brands -----------------------------------------------------------------------------


def test_nvml_brand_enums_run_from_0_to_16_with_the_libnvidia_container_strings():
    brands = load("nvml_brands")["brands"]
    assert [b["enum"] for b in brands] == list(range(17))
    assert [b["string"] for b in brands] == [
        "Unknown",
        "Quadro",
        "Tesla",
        "NVS",
        "GRID",
        "GeForce",
        "TITAN",
        "VApps",
        "VPC",
        "VCS",
        "VWS",
        "CloudGaming",
        "QuadroRTX",
        "NvidiaRTX",
        "Nvidia",
        "GeForceRTX",
        "TitanRTX",
    ]
    assert all(b["require"] == b["string"].lower() for b in brands)


def test_only_the_six_original_brands_and_unknown_predate_libnvidia_container_1_9():
    old = {b["string"] for b in load("nvml_brands")["brands"] if b["since"] == "1.0"}
    assert old == {"Unknown", "Quadro", "Tesla", "NVS", "GRID", "GeForce", "TITAN"}


# --- GPUs ------------------------------------------------------------------------------------


def test_gpu_names_are_unique():
    names = [g["name"] for g in load("gpus")["gpus"]]
    assert len(names) == len(set(names))


def test_gfd_product_label_is_the_name_with_spaces_replaced_by_dashes():
    for g in load("gpus")["gpus"]:
        assert g["gfd_product"] == g["name"].replace(" ", "-"), g["name"]


def test_aliases_are_unique_across_the_file_ignoring_case():
    seen: dict[str, str] = {}
    for g in load("gpus")["gpus"]:
        for a in g["aliases"]:
            key = a.lower()
            assert key not in seen, f"alias {a!r} of {g['name']!r} also belongs to {seen[key]!r}"
            seen[key] = g["name"]
    gfd = {g["gfd_product"].lower() for g in load("gpus")["gpus"]}
    assert not (set(seen) & gfd), "an alias must not shadow another GPU's GFD product label"


def test_every_gpu_mig_profiles_value_names_an_existing_profile_set():
    sets = {s["name"]: s for s in load("mig_profiles")["profile_sets"]}
    for g in load("gpus")["gpus"]:
        if g["mig_profiles"] is not None:
            assert g["mig_profiles"] in sets, g["name"]
            assert g["mig_capable"], g["name"]
            assert g["name"] in sets[g["mig_profiles"]]["gpus"], g["name"]


def test_every_gpu_nvml_brand_is_a_libnvidia_container_brand_string():
    strings = {b["string"] for b in load("nvml_brands")["brands"]}
    for g in load("gpus")["gpus"]:
        assert g["nvml_brand"] in strings, g["name"]


def test_consumer_gpus_report_a_consumer_brand_and_data_center_gpus_do_not():
    cls = {b["string"]: b["class"] for b in load("nvml_brands")["brands"]}
    for g in load("gpus")["gpus"]:
        if g["class"] == "consumer":
            assert cls[g["nvml_brand"]] == "consumer", g["name"]
        else:
            assert cls[g["nvml_brand"]] != "consumer", g["name"]


def test_compute_capability_matches_the_architecture():
    allowed = {
        "volta": {"7.0"},
        "turing": {"7.5"},
        "ampere": {"8.0", "8.6", "8.7"},
        "ada": {"8.9"},
        "hopper": {"9.0"},
        "blackwell": {"10.0", "10.3", "11.0", "12.0", "12.1"},
    }
    for g in load("gpus")["gpus"]:
        assert g["compute_capability"] in allowed[g["architecture"]], g["name"]


def test_gpu_table_has_the_models_the_suite_names():
    names = {g["name"] for g in load("gpus")["gpus"]}
    for n in [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 PCIe",
        "NVIDIA H100 NVL",
        "NVIDIA H200",
        "NVIDIA H200 NVL",
        "NVIDIA B200",
        "NVIDIA GB200",
        "NVIDIA L40S",
        "NVIDIA L4",
        "NVIDIA A10",
        "NVIDIA A30",
        "Tesla T4",
        "Tesla V100-SXM2-32GB",
        "NVIDIA RTX 6000 Ada Generation",
        "NVIDIA RTX A6000",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA GeForce RTX 5090",
        "NVIDIA GeForce RTX 3090",
    ]:
        assert n in names


# --- MIG profiles ----------------------------------------------------------------------------


def test_mig_profile_set_names_are_unique_and_their_gpus_exist():
    sets = load("mig_profiles")["profile_sets"]
    assert len({s["name"] for s in sets}) == len(sets)
    names = {g["name"] for g in load("gpus")["gpus"]}
    for s in sets:
        for g in s["gpus"]:
            assert g in names, (s["name"], g)


def test_mig_profile_slices_and_memory_match_the_profile_name():
    for s in load("mig_profiles")["profile_sets"]:
        for p in s["profiles"]:
            m = re.match(r"^([0-9]+)g\.([0-9]+)gb", p["name"])
            assert (p["slices"], p["memory_gib"]) == (int(m.group(1)), int(m.group(2))), (s["name"], p)


def test_no_mig_profile_needs_more_than_the_seven_compute_slices_of_a_gpu():
    for s in load("mig_profiles")["profile_sets"]:
        for p in s["profiles"]:
            assert p["slices"] * p["max_instances"] <= 7, (s["name"], p)


def test_a100_40gb_profiles_are_the_documented_ones():
    a100 = {s["name"]: s for s in load("mig_profiles")["profile_sets"]}["a100-40gb"]
    got = {p["name"]: p["max_instances"] for p in a100["profiles"]}
    assert {k: got[k] for k in ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]} == {
        "1g.5gb": 7,
        "2g.10gb": 3,
        "3g.20gb": 2,
        "4g.20gb": 1,
        "7g.40gb": 1,
    }


# --- nvidia/cuda images ----------------------------------------------------------------------


def test_every_cuda_image_branch_exists_in_driver_branches():
    table = branches()
    for img in load("cuda_images")["images"]:
        for n in img["branches"]:
            assert n in table, (img["cuda"], n)


def test_cuda_image_rows_are_unique_and_consistent():
    doc = load("cuda_images")
    versions = [i["cuda"] for i in doc["images"]]
    assert len(versions) == len(set(versions))
    brand_tokens = {b["require"] for b in load("nvml_brands")["brands"]}
    for order in doc["brand_orders"].values():
        assert set(order) <= brand_tokens
    for img in doc["images"]:
        assert img["brand_order"] in doc["brand_orders"], img["cuda"]
        assert img["head"] == "cuda>=" + img["cuda"].rsplit(".", 1)[0], img["cuda"]
        assert img["cuda_version_env"] == img["cuda"]


def test_cuda_images_include_every_row_of_the_research_notes_table():
    versions = {i["cuda"] for i in load("cuda_images")["images"]}
    for v in [
        "11.8.0",
        "12.0.1",
        "12.1.1",
        "12.2.2",
        "12.3.2",
        "12.4.1",
        "12.5.1",
        "12.6.3",
        "12.8.0",
        "12.8.1",
        "12.9.0",
        "12.9.1",
        "13.0.0",
    ]:
        assert v in versions


def test_images_from_12_5_on_no_longer_list_geforce():
    doc = load("cuda_images")
    for img in doc["images"]:
        order = doc["brand_orders"][img["brand_order"]]
        if mm(img["cuda"]) >= (12, 5):
            assert "geforce" not in order and "titan" not in order, img["cuda"]
        else:
            assert "geforce" in order, img["cuda"]


def test_reconstructing_require_cuda_for_12_8_1_gives_the_official_string():
    doc = load("cuda_images")
    img = {i["cuda"]: i for i in doc["images"]}["12.8.1"]
    got = reconstruct(img, doc["brand_orders"])
    # First terms written out literally from research/require-cuda.md §9 (and the image's
    # dist/12.8.1/ubuntu2404/base/Dockerfile): head, then branch 470 with the 12 brands.
    first = (
        "cuda>=12.8"
        " brand=unknown,driver>=470,driver<471"
        " brand=grid,driver>=470,driver<471"
        " brand=tesla,driver>=470,driver<471"
        " brand=nvidia,driver>=470,driver<471"
        " brand=quadro,driver>=470,driver<471"
        " brand=quadrortx,driver>=470,driver<471"
        " brand=nvidiartx,driver>=470,driver<471"
        " brand=vapps,driver>=470,driver<471"
        " brand=vpc,driver>=470,driver<471"
        " brand=vcs,driver>=470,driver<471"
        " brand=vws,driver>=470,driver<471"
        " brand=cloudgaming,driver>=470,driver<471"
        " brand=unknown,driver>=535,driver<536"
    )
    assert got.startswith(first)
    assert got.endswith(" brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566")
    tokens = got.split(" ")
    assert len(tokens) == 1 + 5 * 12
    assert "  " not in got
    assert [t.split(",")[1] for t in tokens[1::12]] == [
        "driver>=470",
        "driver>=535",
        "driver>=550",
        "driver>=560",
        "driver>=565",
    ]


def test_reconstructing_require_cuda_for_12_4_1_starts_with_tesla_and_lists_geforce():
    doc = load("cuda_images")
    img = {i["cuda"]: i for i in doc["images"]}["12.4.1"]
    got = reconstruct(img, doc["brand_orders"])
    assert got.startswith(
        "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471"
    )
    assert "brand=geforce,driver>=535,driver<536" in got
    assert got.endswith("brand=titanrtx,driver>=535,driver<536")


def test_reconstructing_require_cuda_for_13_0_0_skips_r560():
    doc = load("cuda_images")
    img = {i["cuda"]: i for i in doc["images"]}["13.0.0"]
    got = reconstruct(img, doc["brand_orders"])
    assert "driver>=560" not in got
    assert got.endswith("brand=cloudgaming,driver>=575,driver<576")


def test_nccl_floors_are_found_by_gpu_alias_and_scale_with_nics():
    from gpuconf.compat.tables import inter_node_floor, intra_node_floor

    h100 = intra_node_floor("H100", 8, "nvswitch", "nvls")
    assert h100 is not None and (h100.figure_gbps, h100.transport) == (460, "NVLS")
    assert h100.minimum_gbps == pytest.approx(437.0)
    assert intra_node_floor("H100", 4, "nvswitch", "nvls") is None  # not in the data: reported, not judged
    ib = inter_node_floor(400, 8)
    assert ib is not None and ib.figure_gbps == 368 and ib.gdr and ib.transport == "NET/IB"
    assert inter_node_floor(200, 8) is None


def test_each_intra_node_floor_names_a_known_gpu_once():
    from gpuconf.compat.tables import find_gpu

    rows = load("nccl_floors")["intra_node"]
    keys = [(r["gpu"], r["gpus"], r["fabric"], r["algorithm"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert all(find_gpu(r["gpu"]) is not None and find_gpu(r["gpu"]).name == r["gpu"] for r in rows)


@pytest.mark.parametrize("path", ["gpuconf/data/faults.yaml", "suites/README.md", "README.md"])
def test_what_a_new_user_reads_names_no_path_outside_the_repository(path):
    """Sources are public (a URL) or repository-relative: a reader of a clone can follow every one."""
    text = (DATA.parent.parent / path).read_text()
    assert not re.findall(r"(?<![\w.:/])/(?:work|home|root|tmp/gpuconf)/[^\s\"')]*", text)
    if path.endswith(".yaml"):
        for fault in yaml.safe_load(text)["faults"]:
            for source in fault["sources"]:
                assert not source.startswith("/") and "domain.md" not in source, (fault["id"], source)
