"""Engine releases: one package per supported (engine, exact version), behind the
`EngineRelease` interface (release.py), registered once in registry.py. See README.md for
what a release package provides. This package's own module stays empty so that importing
any of its parts never runs the registry.
"""
