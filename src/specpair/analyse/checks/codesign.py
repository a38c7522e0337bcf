"""Rules about the draft's co-design with its target: feature layers, block size,
hidden size, mask token, verifier, and the method the draft was trained for."""

from __future__ import annotations

from collections.abc import Iterator

from specpair.analyse.checks.gate import Context, rule
from specpair.engines.draft_method_words import engine_words
from specpair.model.common import Method
from specpair.model.draft_method import TrainedMethod, classify


def _target_ids(ctx: Context) -> list[int] | None:
    return ctx.pair.draft.geometry.target_layer_ids if ctx.pair.draft else None


@rule("SP301")
def _layers_exist(ctx: Context) -> Iterator[tuple[str, str, str]]:
    ids = _target_ids(ctx)
    layers = ctx.pair.target.geometry.num_hidden_layers
    declared = ctx.pair.runbook.codesign.feature_layers
    if ids:
        bad = [i for i in ids if not 0 <= i < layers]
        if bad:
            # the draft's config names them: point at the draft, unless the runbook
            # declares the layers too (then at the declaration a reviewer reads)
            yield (f"draft feature layers {bad} do not exist in the target "
                   f"({layers} layers, ids 0-{layers - 1})",
                   "codesign.feature_layers" if declared is not None else "draft",
                   "pair the draft with the target it was trained on")
    if declared is not None and declared != ids:
        for i, layer in enumerate(declared):
            if layer >= layers:
                yield (f"declared feature layer {layer} does not exist in the target "
                       f"({layers} layers, ids 0-{layers - 1})",
                       f"codesign.feature_layers.{i}",
                       "declare the layers the draft was trained to read (its config's "
                       "target_layer_ids), all below the target's layer count")


@rule("SP302")
def _layers_match(ctx: Context) -> Iterator[tuple[str, str, str]]:
    declared = ctx.pair.runbook.codesign.feature_layers
    ids = _target_ids(ctx)
    if declared is not None and ids is not None and list(ids) != list(declared):
        yield (f"the draft reads target layers {ids}, the runbook declares {declared}",
               "codesign.feature_layers", "fix the runbook or the draft; do not pair blindly")
    if declared is not None and ids is None and ctx.pair.draft is not None:
        yield ("the runbook declares feature layers but the draft config names none",
               "codesign.feature_layers", "check the draft's config (target_layer_ids, or "
               "eagle_config.eagle_aux_hidden_state_layer_ids)")


@rule("SP303")
def _block(ctx: Context) -> Iterator[tuple[str, str, str]]:
    spec = ctx.pair.runbook.speculation
    if not spec.method.is_block_drafter or ctx.pair.draft is None:
        return
    ckpt = ctx.pair.draft.geometry.block_size
    declared = ctx.pair.runbook.codesign.block_size
    if ckpt is not None and spec.block_size != ckpt:
        yield (f"speculation.block_size {spec.block_size} differs from the checkpoint's "
               f"{ckpt}", "speculation.block_size", f"set block_size: {ckpt}")
    if declared is not None and spec.block_size != declared:
        yield (f"speculation.block_size {spec.block_size} differs from codesign.block_size "
               f"{declared}", "codesign.block_size", "make them agree")


@rule("SP304")
def _hidden(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is not None and p.runbook.speculation.method.is_block_drafter and \
            p.draft.geometry.hidden_size != p.target.geometry.hidden_size:
        yield (f"draft hidden size {p.draft.geometry.hidden_size} ≠ target hidden size "
               f"{p.target.geometry.hidden_size}: the first request will fail", "draft",
               "use the draft trained for this target")


@rule("SP305")
def _mask(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is not None and p.draft.geometry.mask_token_id is not None and \
            p.draft.geometry.mask_token_id >= p.target.geometry.vocab_size:
        yield (f"mask token {p.draft.geometry.mask_token_id} is outside the target vocabulary "
               f"({p.target.geometry.vocab_size})", "draft", "use the draft trained for this "
               "target")


@rule("SP306")
def _verifier(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    verifier = p.draft.geometry.verifier if p.draft else None
    target = p.runbook.target.repo or p.runbook.target.path
    if verifier and target and verifier != target:
        yield (f"the draft was built for {verifier}, not {target}", "draft",
               "pair it with its verifier, or retrain it")


@rule("SP307")
def _eagle_hidden(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    if p.draft is None or p.draft.bundled or p.runbook.speculation.method not in (
            Method.EAGLE, Method.EAGLE3):
        return
    t, d = p.target.geometry.hidden_size, p.draft.geometry.hidden_size
    if t != d:
        yield (f"{p.runbook.speculation.method.value} draft hidden size {d} differs from "
               f"the target's {t}: the draft cannot read the target's hidden states",
               "draft", "use the EAGLE draft trained for this target (same hidden size)")



def _trained(ctx: Context) -> TrainedMethod | None:
    p = ctx.pair
    if p.draft is None or p.runbook.speculation.method is Method.NGRAM:
        return None
    return classify(p.draft.geometry, bundled=p.draft.bundled)


@rule("SP309")
def _draft_method(ctx: Context) -> Iterator[tuple[str, str, str]]:
    p = ctx.pair
    trained = _trained(ctx)
    method = p.runbook.speculation.method
    if trained is None or not trained.known or method in trained.methods:
        return
    assert p.draft is not None
    own = sorted(m.value for m in trained.methods)
    # a bundled draft is loaded from the target checkpoint, under the target's name
    architecture = (p.target if p.draft.bundled else p.draft).geometry.architecture
    yield (f"the draft was trained for {' or '.join(own)} ({trained.evidence}), the runbook "
           f"runs it as {method.value}: "
           f"{engine_words(p.engine, method, architecture, trained.methods)}",
           "speculation.method",
           f"set speculation.method: {own[0]}, or use a draft trained for {method.value}")


@rule("SP310")
def _draft_method_unknown(ctx: Context) -> Iterator[tuple[str, str, str]]:
    trained = _trained(ctx)
    if trained is not None and not trained.known:
        method = ctx.pair.runbook.speculation.method.value
        yield (f"not checked whether the draft was trained for {method}: {trained.evidence}",
               "draft", f"confirm on the draft's model card that it is a {method} head (a "
               "head under another method runs at acceptance near nothing), then waive "
               "SP310 with the card as the reason")
