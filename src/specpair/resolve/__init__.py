"""Stage 4, resolve: runbook + lock → a fully resolved pair."""
