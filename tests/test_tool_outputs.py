"""nvidia-smi and nccl-tests output inside a pasted text (a pod log, `kubectl describe`, a user's
paste) is found and read by the parsers: `gpuconf diagnose` summarises it, a truncated copy says
where it stops, a pending MIG mode change in a table is diagnosed, and a requirement error next to
the node's nvidia-smi names the compatibility rule for that driver."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpuconf.cli import main
from gpuconf.diagnose import diagnose
from gpuconf.tool_outputs import read_outputs

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "real"
OLD = ROOT / "tests" / "fixtures"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path,kind", [
    *[(p, "nvidia-smi") for p in sorted((OLD / "smi").glob("table_*.txt"))],
    *[(p, "nvidia-smi") for p in sorted((REAL / "nvidia-smi").glob("table_*.txt"))],
    *[(p, "nvidia-smi -L") for p in sorted((OLD / "smi").glob("list_*.txt"))],
    *[(p, "nvidia-smi -mig") for p in sorted((REAL / "nvidia-smi").glob("mig_mode_*.txt"))],
    *[(p, "nccl-tests") for p in sorted((OLD / "nccl_tests").glob("*.txt"))],
    *[(p, "nccl-tests") for p in sorted((REAL / "nccl-tests").glob("*.txt"))],
], ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_real_output_is_found_in_a_paste_and_read_as_its_own_parser_reads_it(path, kind):
    text = read(path)
    noise = "Events:\n  Warning  BackOff  kubelet  Back-off restarting failed container\n\n"
    (alone,) = read_outputs(text)
    (pasted,) = read_outputs(noise + text + "\nsome trailing words\n")
    assert alone.kind == pasted.kind == kind
    assert pasted.line == alone.line + 3
    if alone.error is None:
        assert pasted.error is None and pasted.summary == alone.summary and pasted.facts == alone.facts
    else:  # a truncated output stays unread, however the paste goes on
        assert pasted.error is not None and ("did not finish" in pasted.error or "truncated" in pasted.error)


@pytest.mark.parametrize("name,kind,count", [
    ("mig_lgip_550_a100_80gb.txt", "nvidia-smi mig -lgip", "7"),
    ("mig_lgi_550_a100_80gb.txt", "nvidia-smi mig -lgi", "2"),
    ("mig_lcip_550_a100_80gb_two_gpu_instances.txt", "nvidia-smi mig -lcip", "6"),
    ("mig_lci_mig_user_guide_a100_40gb.txt", "nvidia-smi mig -lci", "3"),
])
def test_mig_listings_are_found(name, kind, count):
    (o,) = read_outputs("$ nvidia-smi mig -lgi\n" + read(REAL / "nvidia-smi" / name))
    assert (o.kind, o.line, o.facts["entries"], o.error) == (kind, 2, count, None)


def test_a_table_indented_by_kubectl_describe_is_read():
    table = read(REAL / "nvidia-smi" / "table_580_gb10_memory_not_supported.txt")
    indented = "    Last State:  Terminated\n      Message:\n" + "".join(f"        {ln}" for ln in
                                                                     table.splitlines(keepends=True))
    (o,) = read_outputs(indented)
    assert o.error is None and o.facts["driver"] == "580.95.05" and o.line == 3


def test_truncated_outputs_say_where_they_stop():
    (smi,) = read_outputs("header line\n" + read(OLD / "smi" / "table_550_8xH100_no_processes_section.txt"))
    assert smi.error is not None and "truncated" in smi.error
    assert smi.summary.startswith("nvidia-smi output that cannot be read (line ")
    (nccl,) = read_outputs(read(OLD / "nccl_tests" / "all_reduce_4x4xGH200_corrupted_truncated.txt"))
    assert "did not finish" in (nccl.error or "")


def test_nccl_tests_wrong_results_are_named():
    run = read(REAL / "nccl-tests" / "all_reduce_mpirun_tag_output_2xRTX5090.txt")
    lines = run.splitlines(keepends=True)
    i = next(n for n, ln in enumerate(lines) if "  2097152  " in ln)
    # a corrupted row as the GH200 page shows them: the #wrong column counts wrong elements
    lines[i] = lines[i].replace("0.48       0  4368.39", "0.48      12  4368.39")
    (o,) = read_outputs("".join(lines))
    assert o.facts["wrong"] == "12" and "corrupted data" in o.summary


def test_a_pending_mig_mode_in_a_table_is_diagnosed():
    # constructed from a real table: no real capture of a table with a pending "Enabled*" was found
    table = read(REAL / "nvidia-smi" / "table_550_a100_two_ci_per_gpu_instance.txt")
    assert diagnose(table) == []
    pending = table.replace("|              Enabled |", "|             Enabled* |")
    (d,) = diagnose(pending)
    assert d.category == "mig-mode-change-pending" and d.facts == {"gpus": "0"} and "Enabled*" in d.excerpt


@pytest.mark.parametrize("cuda,rule", [("13.1", "minor-version compatibility"), ("13.0", "natively"),
                                       ("14.0", "needs a newer driver")])
def test_a_requirement_error_next_to_nvidia_smi_names_the_rule_for_that_driver(cuda, rule):
    event = ("Warning  Failed  kubelet  Error: failed to create containerd task: ... nvidia-container-cli: "
             f"requirement error: unsatisfied condition: cuda>={cuda}, please update your driver to a newer version, "
             "or use an earlier cuda container: unknown\n")
    text = event + read(REAL / "nvidia-smi" / "table_580_gb10_memory_not_supported.txt")
    (d,) = diagnose(text)
    assert d.category == "requirement-unsatisfied"
    assert (d.facts["node_driver"], d.facts["node_cuda"], d.facts["required_cuda"]) == ("580.95.05", "13.0", cuda)
    assert rule in d.facts["compat_rule"]
    if cuda == "13.1":
        assert "(36)" in d.facts["compat_rule"] and "804" in d.facts["compat_rule"]


def test_the_cli_prints_and_returns_the_outputs(tmp_path):
    path = tmp_path / "paste.txt"
    path.write_text(read(REAL / "nccl-tests" / "all_reduce_srun_label_2x8xH100_unchecked.txt"), encoding="utf-8")
    out = io.StringIO()
    assert main(["diagnose", "--file", str(path)], stdout=out, stderr=io.StringIO()) == 1
    assert "tool output read:\n  line 1: nccl-tests: 16 rank(s) on node005, node007, peak busbw 167.87 GB/s" \
        in out.getvalue()
    out = io.StringIO()
    main(["diagnose", "--json", "--file", str(path)], stdout=out, stderr=io.StringIO())
    (o,) = json.loads(out.getvalue())["outputs"]
    assert o["kind"] == "nccl-tests" and o["facts"]["launcher_prefix"] == " 0: " and o["error"] is None


def test_a_failing_check_s_hint_reads_tool_output_in_its_evidence():
    from gpuconf.kit.evidence import _diagnosis
    from gpuconf.verdict import Outcome, Verdict

    table = read(REAL / "nvidia-smi" / "table_550_a100_two_ci_per_gpu_instance.txt")
    # constructed from a real table, as above: the pending "*" a mig-mode change leaves
    evidence = ("probe log:\n" + table.replace("|              Enabled |", "|             Enabled* |"),)
    verdict = Verdict("mig.layout-matches-config", "node-1", Outcome.FAIL, "MIG layout differs", evidence=evidence)
    recorded: list[tuple[str, str]] = []
    text = _diagnosis(verdict, lambda name, value: recorded.append((name, value)))
    assert recorded == [("gpuconf.diagnosis", "mig-mode-change-pending")]
    assert "MIG mode change is pending" in text
