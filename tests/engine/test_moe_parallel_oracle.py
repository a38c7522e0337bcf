"""vLLM's own MoE sharding as the oracle for specpair's expert- and data-parallel rules
(nox -s engines).

vLLM has no expert-parallel size: `--enable-expert-parallel` shards the routed experts
over every tensor × data rank, and without it the MoE layers of the data-parallel ranks
are still one tensor-parallel group of tensor × data ranks (`FusedMoEParallelConfig.make`
flattens TP across DP). specpair budgets and times one replica of `tensor` ranks, so it
can hold only the layouts where the engine's MoE group is exactly those ranks, with the
expert degree the runbook declares.

For every MoE target of the oracle corpus that vLLM loads, and each tensor × data ×
expert layout on one 8-GPU node: specpair's generated `vllm serve` command goes through
vLLM 0.33.0's own parser and `make_parallel_config` (tests/engine/vllm_moe_parallel.py),
whose MoE tensor and expert-parallel sizes decide what specpair must say. A layout whose
expert degree is the engine's EP size (1 when off) and whose MoE group is one replica's
tensor ranks must validate and budget; every other must be refused, naming
deployment.parallel.expert or deployment.parallel.data. Nothing is mocked but the
process group's ranks (named in the worker script).
"""

from __future__ import annotations

from typing import Any

from specpair.analyse.budget import compute
from specpair.analyse.launch import build_for
from specpair.load.rules import check_runbook
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import ResolvedPair
from tests.engine import releases, workers
from tests.engine.corpus import PAIRS, TENSOR_PARALLEL, geometry, make_pair

RELEASE = "vllm 0.33.0"
GPUS = 8
DATA = (1, 2)
EXPERT = (1, 2, 4, 8, 16)
MOE_PAIRS = [p for p in PAIRS if "vllm" in p.engines and p.draft is None
             and geometry(p.target, p.root).moe is not None]


def _verdict(pair: ResolvedPair) -> tuple[bool, str]:
    """specpair's answer: (accepted, the refusal's field and message)."""
    errors = [f for f in check_runbook(pair.runbook) if f.severity == "error"]
    if errors:
        return False, f"{errors[0].field}: {errors[0].message}"
    try:
        compute(pair)
    except SpecpairError as exc:
        return False, exc.problems[0].render()
    return True, ""


def _cases() -> list[tuple[str, ResolvedPair, int, int, int]]:
    cases = []
    for corpus in MOE_PAIRS:
        for tp in TENSOR_PARALLEL:
            for dp in DATA:
                if tp * dp > GPUS:
                    continue
                for ep in EXPERT:
                    pair = make_pair(corpus, "vllm", releases.version(RELEASE), tp, "auto", {
                        "parallel": {"tensor": tp, "data": dp, "expert": ep}})
                    if pair is not None:  # heads that do not split: the TP oracle's cases
                        cases.append((f"{corpus.name} tp{tp} dp{dp} ep{ep}", pair, tp, dp, ep))
    return cases


def test_expert_and_data_parallel_follow_vllms_moe_sharding() -> None:
    cases = _cases()
    assert len(MOE_PAIRS) >= 5 and len(cases) >= 150, (len(MOE_PAIRS), len(cases))
    argvs = []
    for _, pair, *_ in cases:
        argv = build_for(pair).argv
        assert all(isinstance(a, str) for a in argv), argv  # no secret in these launches
        argvs.append([str(a) for a in argv])
    engine: list[dict[str, Any]] = workers.call("vllm_moe_parallel", "batch",
                                                releases.env(RELEASE), argvs, timeout=600)
    assert len(engine) == len(cases)
    wrong = []
    kinds = {"accepted": 0, "refused: expert": 0, "refused: data": 0}
    for (name, pair, tp, dp, ep), found in zip(cases, engine, strict=True):
        assert found["ok"], (name, found)
        # the launch says what the runbook declares (else the check below is vacuous)
        assert (found["tensor"], found["data"]) == (tp, dp), (name, found)
        assert found["enable_expert_parallel"] == (ep > 1), (name, found)
        expert_size = found["moe_ep_size"] if found["use_ep"] else 1
        group = found["moe_tp_size"] * found["moe_ep_size"]
        holds = ep == expert_size and group == tp
        accepted, why = _verdict(pair)
        if accepted != holds:
            wrong.append(f"{name}: vLLM shards the MoE layers tp {found['moe_tp_size']} × "
                         f"ep {found['moe_ep_size']}; specpair "
                         f"{'accepts' if accepted else 'refuses: ' + why}")
        elif not accepted:
            named = "parallel.expert" if ep != expert_size else "parallel.data"
            assert named in why, (name, why)
            kinds["refused: " + named.split(".")[1]] += 1
        else:
            kinds["accepted"] += 1
    assert not wrong, "\n".join(wrong)
    # each kind occurs, so the test can tell a rule that refuses everything from one that
    # refuses nothing
    assert all(kinds.values()), kinds
