"""What ``dcgmi diag -r LEVEL --json`` prints in the DCGM image on a simulated node (the diag pod of
suites/test_dcgm.py): a DCGM 4.x document (``"DCGM Diagnostic"``, per-test ``test_summary``,
results per GPU entity, errors as ``warnings`` entries with ``error_id``/``error_category``/
``error_severity``), built from the node model, and dcgmi's exit status.

The model: every test of the level (gpuconf/data/dcgm_diag.yaml) passes on every healthy GPU; a
GPU with uncorrectable ECC errors fails the ``memory`` test with DCGM_FR_VOLATILE_DBE_DETECTED; a
GPU with a critical Xid fails the ``diagnostic`` test (level 3 and up) with DCGM_FR_XID_ERROR, the
message formats of dcgm_errors.h. Both are isolate-severity errors, so dcgmi exits 205
(DCGM_ST_NVVS_ISOLATE_ERROR). A node with any MIG-enabled GPU gets dcgmi's refusal, not a document
(NVIDIA/DCGM issues #70, #94); its exit status is not documented, the simulator uses 1.

GPU ids are the hostengine's within the container: 0..n-1 over the GPUs the pod was given, in
NVML index order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from gpuconf.compat import tables
from gpuconf.sim.emulate import Visible
from gpuconf.sim.profile import SimNode

__all__ = ["diag_request", "dcgm_diag_run", "is_dcgm_image"]

#: The category dcgmi files each test under.
_CATEGORY = {"software": "Deployment", "pcie": "Integration", "memory": "Hardware", "diagnostic": "Hardware",
             "pulse_test": "Hardware", "memory_bandwidth": "Stress", "targeted_stress": "Stress",
             "targeted_power": "Stress", "memtest": "Stress"}
_ORDER = ("Deployment", "Integration", "Hardware", "Stress")
#: dcgmErrorSeverity_t DCGM_ERROR_ISOLATE.
_ISOLATE = 2
_LEVEL = re.compile(r"\bdcgmi diag (?:.* )?(?:-r|--run) ([1-4])\b")
_DCGM_VERSION = "4.4.2"


def is_dcgm_image(normalized: str) -> bool:
    """The DCGM image, from NGC or mirrored under a registry (``.../nvidia/cloud-native/dcgm:<tag>``)."""
    path = str(tables.load("dcgm_diag")["image"]["path"])
    return normalized.split("@", 1)[0].rsplit(":", 1)[0].endswith("/" + path)


def diag_request(args: Sequence[str]) -> int | None:
    """The level a container's command line runs ``dcgmi diag`` at, or None when it runs none."""
    match = _LEVEL.search(" ".join(args))
    return int(match.group(1)) if match else None


def _error(name: str, **values: Any) -> dict[str, Any]:
    row = next(e for e in tables.load("dcgm_diag")["errors"] if e["name"] == name)
    return {"error_category": int(row["category"]), "error_id": int(row["id"]),
            "error_severity": int(row["severity"]), "warning": str(row["format"]).format(**values)}


def _errors(test: str, gpu_id: int, v: Visible) -> list[dict[str, Any]]:
    g = v.gpu
    if test == "memory" and g.ecc_uncorrected > 0:
        return [_error("DCGM_FR_VOLATILE_DBE_DETECTED", count=g.ecc_uncorrected, gpu=gpu_id)]
    if test == "diagnostic" and g.xids:
        return [_error("DCGM_FR_XID_ERROR", xid=g.xids[-1], gpu=gpu_id)]
    return []


def dcgm_diag_run(node: SimNode, *, visible: Sequence[Visible], level: int) -> tuple[int, str]:
    """(exit status, stdout) of ``dcgmi diag -r level --json`` over the GPUs the container holds."""
    if any(g.mig_enabled for g in node.gpus):
        lines = [f"GPU {g.index}'s MIG configuration is incompatible with the diagnostic because it prevents access "
                 "to the entire GPU." for g in node.gpus if g.mig_enabled]
        return 1, "\n".join(lines) + "\n"
    gpus = sorted({v.gpu.index: v for v in visible if v.mig is None and v.gpu.present}.values(),
                  key=lambda v: v.gpu.index)
    if not gpus:
        return 1, json.dumps({"DCGM Diagnostic": {"version": _DCGM_VERSION,
                                                  "runtime_error": "No GPUs found to run the diagnostic on"}}) + "\n"
    row = next(r for r in tables.load("dcgm_diag")["levels"] if int(r["level"]) == level)
    categories: dict[str, list[dict[str, Any]]] = {}
    worst = 0
    for test in row["tests"]:
        results = []
        for gpu_id, v in enumerate(gpus):
            errors = _errors(str(test), gpu_id, v)
            result: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu_id,
                                      "status": "Fail" if errors else "Pass"}
            if errors:
                result["warnings"] = errors
                worst = max(worst, 2 if any(e["error_severity"] == _ISOLATE for e in errors) else 1)
            results.append(result)
        summary = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        categories.setdefault(_CATEGORY.get(str(test), "Hardware"), []).append(
            {"name": str(test), "results": results, "test_summary": {"status": summary}})
    doc = {
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": categories[c]} for c in _ORDER
                                                if c in categories]},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                           "entities": [{"entity_id": i, "device_id": "", "serial_num": f"SIM{v.gpu.uuid[-12:]}"}
                                        for i, v in enumerate(gpus)]}],
        "metadata": {"version": _DCGM_VERSION, "Driver Version Detected": str(node.driver)},
    }
    code = {0: 0, 1: 226, 2: 205}[worst]  # DCGM_ST_OK, DCGM_ST_NVVS_ERROR, DCGM_ST_NVVS_ISOLATE_ERROR
    return code, json.dumps(doc, indent=2) + "\n"
