"""The GPU catalog as reviewed data, case-insensitive lookups, and GPUs declared inline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specpair.analyse.budget import compute
from specpair.analyse.latency import model
from specpair.facts import hardware
from specpair.load.runbooks import load_runbook
from specpair.model.errors import SpecpairError
from specpair.model.runbook import InlineGPU
from tests.support.geometries import dense
from tests.support.pairs import make_pair
from tests.support.paths import REPO, write
from tests.support.runbooks import MINIMAL

# the GPUs issue 14 asks the catalog to cover, as an operator would spell them
REQUIRED = ["h100-sxm", "h100-pcie", "H100-NVL", "H200", "H20", "GH200", "B200", "B300",
            "GB200", "A100-40GB", "A100-80GB", "A10G", "L4", "L40S", "RTX-PRO-6000",
            "rtx-4090", "RTX-5090", "MI300X", "MI325X", "MI355X"]


@pytest.mark.parametrize("name", REQUIRED)
def test_the_catalog_covers_the_common_gpus(name: str) -> None:
    gpu = hardware.lookup(name)
    assert gpu is not None, hardware.unknown_hint(name)
    assert gpu.source and gpu.family
    assert gpu.free_before_load_bytes < gpu.memory_bytes


def test_catalog_figures_agree_with_the_reference_sheet() -> None:
    # the vendors' data sheets (NVIDIA H100/H200/B200/A100/L40S, AMD MI300X): bandwidth
    # and dense BF16 peak
    published = {"H100-80GB": (3.35, 989.4), "H200-141GB": (4.8, 989.0),
                 "B200-180GB": (8.0, 2250.0), "A100-80GB": (2.039, 312.0),
                 "L40S-48GB": (0.864, 362.05), "MI300X-192GB": (5.3, 1307.4)}
    for key, (tb_s, tflops) in published.items():
        gpu = hardware.CATALOG[key]
        assert (gpu.bandwidth_bytes_per_s, gpu.bf16_dense_flops) == (tb_s * 1e12, tflops * 1e12)
    # where FP8 exists its dense peak is twice BF16's on every one of these parts
    for gpu in hardware.CATALOG.values():
        if gpu.fp8_dense_flops is not None:
            assert gpu.fp8_dense_flops == pytest.approx(2 * gpu.bf16_dense_flops, rel=0.02)


def test_keys_are_case_insensitive_and_near_misses_get_a_suggestion(tmp_path: Path) -> None:
    assert hardware.lookup("h200-141gb") is hardware.CATALOG["H200-141GB"]
    loaded = load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                                MINIMAL.replace("gpu: H100-80GB", "gpu: h100-80gb")))
    assert loaded.runbook.deployment.gpu == "h100-80gb"
    with pytest.raises(SpecpairError) as info:
        load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                           MINIMAL.replace("gpu: H100-80GB", "gpu: H100-80G")))
    (problem,) = info.value.problems
    assert problem.location.field == "deployment.gpu" and problem.location.line == 6
    assert problem.hint.startswith("did you mean H100-80GB")
    assert "inline" in problem.hint


INLINE = ('{name: "RTX PRO 6000 Blackwell", memory_mib: 97887, bandwidth_tb_s: 1.792, '
          'bf16_dense_tflops: 252, fp8_dense_tflops: 504}')


def test_an_inline_gpu_validates_and_budgets(tmp_path: Path) -> None:
    loaded = load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                                MINIMAL.replace("gpu: H100-80GB", f"gpu: {INLINE}")))
    gpu = hardware.resolve(loaded.runbook.deployment.gpu)
    assert gpu.memory_bytes == 97887 << 20 and gpu.bandwidth_bytes_per_s == 1.792e12
    assert gpu.fp8_dense_flops == 504e12 and gpu.family is None
    pair = make_pair(dense(32), dense(1), speculation={"method": "EAGLE3",
                                                       "num_speculative_tokens": 3},
                     deployment={"gpu": json.loads(json.dumps(
                         loaded.runbook.deployment.gpu.model_dump()))})  # type: ignore[union-attr]
    assert pair.gpu == "RTX PRO 6000 Blackwell"
    budget = compute(pair)
    assert budget.gpu == "RTX PRO 6000 Blackwell" and budget.baseline.max_total_tokens > 0
    assert any("RTX PRO 6000 Blackwell" in a for a in model(pair, budget).assumptions)


def test_inline_gpu_errors_point_at_the_field(tmp_path: Path) -> None:
    with pytest.raises(SpecpairError) as info:
        load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml", MINIMAL.replace(
            "gpu: H100-80GB", "gpu: {name: x, memory_mib: 1000, bandwidth_tb_s: -1, "
                              "bf16_dense_tflops: 10}")))
    fields = {p.location.field for p in info.value.problems}
    assert "deployment.gpu.InlineGPU.bandwidth_tb_s" in fields or \
        "deployment.gpu.bandwidth_tb_s" in fields, fields


def test_the_schema_shows_both_forms_of_gpu() -> None:
    schema = json.loads((REPO / "schema" / "runbook.schema.json").read_text())
    gpu = schema["$defs"]["Deployment"]["properties"]["gpu"]
    refs = json.dumps(gpu)
    assert '"type": "string"' in refs and "InlineGPU" in refs
    inline = schema["$defs"]["InlineGPU"]
    assert set(inline["required"]) == {"name", "memory_mib", "bandwidth_tb_s",
                                       "bf16_dense_tflops"}
    assert {"fp8_dense_tflops", "free_before_load_gib"} <= set(inline["properties"])


def test_a_runbook_with_an_inline_gpu_builds(repo_copy: Path) -> None:
    from specpair.commands.build import build

    runbook = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm" / "runbook.yaml"
    text = runbook.read_text()
    runbook.write_text(text.replace("gpu: H100-80GB", "gpu: " + INLINE.replace(
        "memory_mib: 97887", "memory_mib: 97887, free_before_load_gib: 94")))
    assert runbook.read_text() != text
    build(repo_copy)
    out = repo_copy / "runbooks" / "llama33-70b-eagle3-vllm" / "generated"
    budget = json.loads((out / "budget.json").read_text())
    assert budget["gpu"] == "RTX PRO 6000 Blackwell"
    assert "RTX PRO 6000 Blackwell: 1.792 TB/s" in (out / "breakeven.md").read_text()


@pytest.mark.parametrize("key", sorted(hardware.CATALOG))
def test_a_runbook_and_a_calibration_point_see_one_gpu_alike(key: str) -> None:
    """The step model's view of a GPU (bandwidth, the tensor peaks, FP4's on Blackwell
    included, the TP link) is the same whether a runbook or a calibration point names it:
    a runbook's NVFP4 target must meet the FP4 peak the fits were made with."""
    from specpair.analyse import latency, point_prediction

    pair = make_pair(dense(32), dense(1), speculation={"method": "EAGLE3",
                                                       "num_speculative_tokens": 3},
                     deployment={"gpu": key})
    hw = latency.setup(pair, compute(pair)).hw
    assert hw == point_prediction.hardware_of(key)
    assert hw.bandwidth == hardware.CATALOG[key].achievable_bandwidth_bytes_per_s
    assert hw.fp4_flops == hardware.CATALOG[key].fp4_dense_flops


def test_every_measured_bandwidth_is_the_fastest_reading_kernel_its_quote_shows() -> None:
    """Each measured figure is the fastest kernel that reads memory among those its quote
    prints: BabelStream's Copy/Mul/Add/Triad/Dot in TB/s, or gpu-stream's read, scale and
    triad in GB/s (its write-only init excluded); and it lies below the datasheet peak."""
    import re

    measured = [g for g in hardware.CATALOG.values()
                if g.measured_bandwidth_bytes_per_s is not None]
    assert {g.memory_system for g in measured} >= {("nvidia", "hbm"), ("nvidia", "gddr"),
                                                  ("amd", "hbm")}
    for gpu in measured:
        quote = gpu.bandwidth_measurement
        babel = [float(x) for x in re.findall(r"\| (?:Copy|Mul|Add|Triad|Dot) \| ([0-9.]+) \|",
                                              quote)]
        stream = re.search(r"init read scale triad: 'GB/s: (\d+) (\d+) (\d+) (\d+)'", quote)
        assert bool(babel) != bool(stream), gpu.key  # one harness per figure
        best = max(babel) if babel else max(int(x) for x in stream.groups()[1:]) / 1000  # type: ignore[union-attr]
        if babel:
            assert len(babel) == 5, gpu.key  # every kernel quoted
        assert gpu.measured_bandwidth_bytes_per_s == pytest.approx(best * 1e12), gpu.key
        assert 0.6 < gpu.measured_bandwidth_bytes_per_s / gpu.bandwidth_bytes_per_s < 1.0


def test_a_measured_bandwidth_above_the_peak_is_refused() -> None:
    raw = {"key": "X", "name": "X", "family": "hopper", "memory_mib": 1000,
           "memory_status": "reported", "status": "checked", "interconnect": "nvlink4",
           "bandwidth_tb_s": 2.0, "bf16_dense_tflops": 100, "free_before_load_gib": 0.5,
           "source": "test", "measured_bandwidth_tb_s": 2.5, "bandwidth_measurement": "q",
           "memory_kind": "hbm"}

    def entry(data: dict[str, object]) -> hardware.GPU:
        return hardware._entry(hardware.CatalogEntry.model_validate(data))

    with pytest.raises(ValueError, match="must lie in"):
        entry(raw)
    with pytest.raises(ValueError, match="needs its bandwidth_measurement"):
        entry({**raw, "measured_bandwidth_tb_s": 1.5, "bandwidth_measurement": ""})
    assert entry({**raw, "measured_bandwidth_tb_s": 1.5}) \
        .achievable_bandwidth_bytes_per_s == 1.5e12
    for kind in (None, "HBM3", "gddr6"):
        with pytest.raises(ValueError, match="'hbm' or 'gddr'"):
            entry({**raw, "measured_bandwidth_tb_s": 1.5, "memory_kind": kind})


def test_an_inline_measured_bandwidth_above_its_peak_points_at_the_field(
        tmp_path: Path) -> None:
    with pytest.raises(SpecpairError) as info:
        load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml", MINIMAL.replace(
            "gpu: H100-80GB", "gpu: {name: x, memory_mib: 1000, bandwidth_tb_s: 1.0, "
                              "measured_bandwidth_tb_s: 1.2, bf16_dense_tflops: 10}")))
    (problem,) = [p for p in info.value.problems  # the union's string form also fails
                  if p.location.field.endswith("measured_bandwidth_tb_s")]
    assert problem.location.line == 6 and "exceeds the 1 TB/s peak" in problem.message


def test_a_gpu_without_a_measurement_says_its_bandwidth_is_assumed() -> None:
    """An unmeasured GPU's memory roof is its peak times the median measured share of the
    GPUs of its vendor and memory kind (an AMD HBM part takes the MI300X's, a GeForce card
    the GDDR figure, not an HBM one), of the whole catalog for a GPU declared inline; every
    latency output says so."""
    def share(key: str) -> float:
        g = hardware.CATALOG[key]
        return g.achievable_bandwidth_bytes_per_s / g.bandwidth_bytes_per_s

    b200 = hardware.CATALOG["B200-180GB"]
    assert b200.measured_bandwidth_bytes_per_s is None
    assert share("MI325X-256GB") == pytest.approx(share("MI300X-192GB"))
    assert share("MI355X-288GB") == pytest.approx(share("MI300X-192GB"))
    assert share("RTX-5090-32GB") == pytest.approx(share("L40S-48GB"))
    assert share("MI355X-288GB") < share("B200-180GB") < share("RTX-5090-32GB")
    assert "not measured" in b200.bandwidth_basis and "NVIDIA HBM" in b200.bandwidth_basis
    inline = hardware.inline(InlineGPU(name="x", memory_mib=1000, bandwidth_tb_s=1.0,
                                       bf16_dense_tflops=10))
    assert "the catalog's GPUs" in inline.bandwidth_basis
    assert hardware.inline(InlineGPU(name="x", memory_mib=1000, bandwidth_tb_s=1.0,
                                     bf16_dense_tflops=10, measured_bandwidth_tb_s=0.9)) \
        .achievable_bandwidth_bytes_per_s == 0.9e12
    pair = make_pair(dense(32), dense(1), speculation={"method": "EAGLE3",
                                                       "num_speculative_tokens": 3},
                     deployment={"gpu": "B200-180GB"})
    assert any("not measured" in a for a in model(pair, compute(pair)).assumptions)


def test_a_plan_names_each_searched_gpus_bandwidth_and_whether_it_was_measured() -> None:
    from specpair.analyse.plan import search
    from specpair.analyse.plan.options import Options
    from specpair.analyse.plan.planner import Planner

    pair = make_pair(dense(32), dense(1), speculation={"method": "EAGLE3",
                                                       "num_speculative_tokens": 3})
    planner = Planner(pair, Options(gpus=("H100-80GB", "B200-180GB")))
    (line,) = [a for a in search._assumptions(planner) if a.startswith("memory bandwidth")]
    assert "H100-80GB: 3.35 TB/s peak, 3.18 TB/s measured" in line
    assert "B200-180GB" in line and "assumed" in line and "NVIDIA HBM GPUs: H100-80GB" in line


@pytest.mark.parametrize(("device", "key"), [
    # as `nvidia-smi --query-gpu=name` and `rocm-smi --showproductname` print them
    ("NVIDIA H100 80GB HBM3", "H100-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA GH200 480GB", "GH200-96GB"),
    ("NVIDIA L4", "L4-24GB"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090-24GB"),
    ("AMD Instinct MI300X", "MI300X-192GB"),
])
def test_a_drivers_device_name_gets_its_catalog_key(tmp_path: Path, device: str,
                                                     key: str) -> None:
    """Issue 51: nvidia-smi's names got no suggestion, or another chip's first."""
    with pytest.raises(SpecpairError) as info:
        load_runbook(write(tmp_path / "runbooks" / "demo" / "runbook.yaml",
                           MINIMAL.replace("gpu: H100-80GB", f"gpu: {device}")))
    (problem,) = info.value.problems
    assert problem.location.field == "deployment.gpu"
    assert problem.hint.startswith(f"did you mean {key}? "), problem.hint
