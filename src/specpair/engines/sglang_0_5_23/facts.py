"""SGLang 0.5.23, as read in its wheel (`pip download --no-deps sglang==0.5.23`)."""

from __future__ import annotations

from specpair.engines.profile import EngineProfile
from specpair.model.common import Method

PROFILE = EngineProfile(
    name="sglang",
    version="0.5.23",
    # `MTP` is not an algorithm name in 0.5.23 (from_string raises); NEXTN is the alias of
    # EAGLE that built-in MTP layers use. STANDALONE is a separate small LM.
    method_names={
        Method.EAGLE: "EAGLE",
        Method.EAGLE3: "EAGLE3",
        Method.MTP: "NEXTN",
        Method.STANDALONE: "STANDALONE",
        Method.DFLASH: "DFLASH",
        Method.DSPARK: "DSPARK",
        Method.NGRAM: "NGRAM",
    },
    default_page_size=1,
    supports_tree_drafts=True,
    display_name="SGLang",
    default_port=30000,  # srt/arg_groups/arg_utils.py: `port: ... = 30000`
    # score_ranked_tree: eagle_utils.py organize_draft_results keeps torch.topk(scores,
    # num_draft_token - 1) of the candidates select_top_k_tokens expands (0.5.18: the same)
    capabilities=frozenset({"overlap_weight_loading", "score_ranked_tree"}),
)
