"""Stage 3, lock: resolving a runbook's two artifacts into lock facts (local folders,
the hub, declared sizes)."""
