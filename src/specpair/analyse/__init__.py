"""Stage 5, analyse: every number of a resolved pair (budget, step model, schedule,
staging, gate, plan)."""
