"""`specpair plan`: the deployment of a pair that serves the most under its SLO and targets.

The search runs the same pipeline a runbook does. Each candidate is a runbook variant
(GPU type, TP, KV dtype, memory fraction, the draft's depth, or no draft at all) that goes
through the engine release's budget (`specpair.analyse.budget`), the calibrated step model
(`specpair.analyse.stepmodel` with `specpair.analyse.calibrated_params`' parameters) and
the whole gate (`specpair.analyse.checks`, which holds the engines' start-up rules).
Nothing is ranked that an engine would refuse or the budget cannot hold, and a candidate
that fails the gate for any other reason is shown with the rule but never recommended.

Operating point, per candidate:

- a concurrency given (`--concurrency`, else the runbook's expected one): evaluated there;
  a deployment that cannot hold it, or misses a latency target there, drops out;
- no concurrency: the most concurrent sequences the deployment holds while meeting the
  latency targets and, for a draft, keeping the SLO 10% above break-even;
- a request rate (`--rate`): the fewest replicas of the deployment that serve it, each at
  the lowest concurrency that keeps up (Little's law on the model's own throughput).

Acceptance by depth comes from `specpair.analyse.acceptance`: the pair's per-position
measurements where they exist, else its reference τ, else its SLO; the SLO is carried to
each depth the same way, so the written runbook states the floor of the shape it runs.
"""
