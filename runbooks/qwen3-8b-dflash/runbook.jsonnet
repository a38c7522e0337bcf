// Qwen3-8B with the z-lab DFlash block drafter (block 16) on SGLang.
local base = import '../lib/sglang-dense.libsonnet';

base {
  pair: {
    name: 'qwen3-8b-dflash',
    title: 'Qwen3-8B with the DFlash b16 drafter',
    owner: 'serving-platform',
    description: 'Block drafter: one draft forward proposes a whole 16-token block.',
  },
  target: { repo: 'Qwen/Qwen3-8B', revision: 'main', dtype: 'bfloat16' },
  draft: { repo: 'z-lab/Qwen3-8B-DFlash-b16', revision: 'main', trust_remote_code: true },
  speculation: { method: 'DFLASH', block_size: 16 },
  deployment+: { context_length: 32768 },
  acceptance: {
    slo: { min_length: 3.0, scope: 'per_request', percentile: 10, basis: 'provisional' },
  },
  codesign: { feature_layers: [1, 9, 17, 25, 33], block_size: 16 },
  waivers: [
    { rule: 'SP101', reason: 'Declared lock: the hub was not reachable when this pair was written; the first `specpair lock` with hub access pins the commit.' },
    { rule: 'SP104', reason: 'Facts declared from the model card and public config copies (see lock sources); replaced by `specpair lock` with hub access.' },
    { rule: 'SP702', reason: 'No production traffic yet; the measurement protocol (`specpair bench`) replaces this provisional SLO.' },
  ],
}
