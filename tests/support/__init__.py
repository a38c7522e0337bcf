"""Helpers shared by the tests (servers, checkpoints, process limits); no test module
imports another test module."""
