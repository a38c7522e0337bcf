"""Pydantic models: the authored runbook (`runbook`) and the resolved lock (`lock`)."""
