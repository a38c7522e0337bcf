"""vLLM 0.33.0, as read in its wheel (`pip download --no-deps vllm==0.33.0`)."""

from __future__ import annotations

from specpair.engines.profile import EngineProfile
from specpair.model.common import Method

PROFILE = EngineProfile(
    name="vllm",
    version="0.33.0",
    # SpeculativeMethod literals; a standalone small LM is `draft_model`, built-in MTP
    # layers are `mtp` (model-specific aliases are rewritten to it with a warning).
    method_names={
        Method.EAGLE: "eagle",
        Method.EAGLE3: "eagle3",
        Method.MTP: "mtp",
        Method.STANDALONE: "draft_model",
        Method.DFLASH: "dflash",
        Method.DSPARK: "dspark",
        Method.NGRAM: "ngram",
    },
    default_page_size=16,
    supports_tree_drafts=False,
    display_name="vLLM",
    default_port=8000,  # vllm/entrypoints/common/cli_args.py:295 `port: int = 8000`
    capabilities=frozenset({"draft_tensor_parallel", "heterogeneous_vocab",
                            "multi_node_data_parallel", "moe_over_data_parallel"}),
)
