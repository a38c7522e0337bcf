"""Stage 0, model: the types every stage shares: the authored runbook (`runbook`), the
resolved lock (`lock`), geometry, errors and findings, the shape of a budget."""
