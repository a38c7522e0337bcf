"""The one registry of supported engine releases, keyed by (engine, exact version).

Each supported release is one package beside this module
(`specpair/engines/<name>_<version>/`, see README.md) with its flag spellings, method
names, launch, budget and metrics, read from that release's source (its wheel). An
unknown version is an error that lists the supported ones: never a silent fallback to
another release's rules. Adding a release is adding its package and one line below.
"""

from __future__ import annotations

from importlib import resources

from specpair.engines import sglang_0_5_18, sglang_0_5_23, vllm_0_32_0, vllm_0_33_0, vllm_0_34_0
from specpair.engines.release import EngineProfile, EngineRelease

__all__ = ["RELEASES", "EngineProfile", "EngineRelease", "by_label", "find_label",
           "get_profile", "get_release", "labels", "release_file", "rendered_for",
           "supported"]

RELEASES: dict[tuple[str, str], EngineRelease] = {
    (r.name, r.version): r for r in (
        sglang_0_5_23.RELEASE,
        sglang_0_5_18.RELEASE,
        vllm_0_34_0.RELEASE,
        vllm_0_33_0.RELEASE,
        vllm_0_32_0.RELEASE,
    )
}


def labels() -> list[str]:
    """Every supported release as `name version`, sorted."""
    return sorted(r.label for r in RELEASES.values())


supported = labels


def release_file(label: str, name: str) -> str | None:
    """The text of a data file in a release's own package (`engines/<name>_<version>/`),
    or None where the release has none: what a release knows lives in its folder."""
    release = by_label(label)
    package = f"specpair.engines.{release.name}_{release.version.replace('.', '_')}"
    path = resources.files(package).joinpath(name)
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def rendered_for(label: str) -> list[str]:
    """The launches a pair's outputs carry, sorted: its own release, and as translations the
    newest supported release of every other engine. Another release of the same engine is
    an upgrade (`specpair impact` reviews it), not a translation, and would write the same
    launch-<engine>.sh."""
    own = by_label(label)
    newest: dict[str, EngineRelease] = {}
    for release in RELEASES.values():
        if release.name == own.name:
            continue
        held = newest.get(release.name)
        if held is None or _version_key(release.version) > _version_key(held.version):
            newest[release.name] = release
    return sorted([own.label, *(r.label for r in newest.values())])


def get_release(name: str, version: str) -> EngineRelease | None:
    return RELEASES.get((name, version))


def get_profile(name: str, version: str) -> EngineProfile | None:
    found = RELEASES.get((name, version))
    return found.profile if found else None


def every_release_has(name: str, capability: str) -> bool:
    """Whether every supported release of engine `name` has `capability`: what holds of
    the engine whatever its release, for measurements that name the engine but not one of
    its supported releases (the calibration points)."""
    found = [r.profile for (engine, _), r in RELEASES.items() if engine == name]
    return bool(found) and all(capability in p.capabilities for p in found)


def find_label(label: str) -> EngineRelease | None:
    """The release of a label such as `vllm 0.33.0`, or None."""
    name, _, version = label.partition(" ")
    return RELEASES.get((name, version))


def by_label(label: str) -> EngineRelease:
    """The release of a label the resolver produced (validated at load)."""
    found = find_label(label)
    if found is None:
        raise KeyError(label)
    return found
