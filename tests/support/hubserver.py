"""A local stand-in for the Hugging Face Hub: the subset of its HTTP API that
huggingface_hub uses to lock an artifact, served on 127.0.0.1.

Repos are built in the test from real files. The server speaks the hub's protocol details
the client relies on (X-Repo-Commit, ETag, X-Error-Code, HTTP ranges), can be told to fail
or stall, and counts every byte it sends so tests can prove that no weights move.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.support.answer_server import Answer, send


@dataclass
class Repo:
    refs: dict[str, str] = field(default_factory=dict)
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    gated: bool = False
    token: str | None = None

    def commit(self, files: dict[str, bytes], branch: str = "main") -> str:
        digest = hashlib.sha1(json.dumps(sorted((k, hashlib.sha1(v).hexdigest())
                                                for k, v in files.items())).encode()
                              + str(len(self.commits)).encode()).hexdigest()
        self.commits[digest] = dict(files)
        self.refs[branch] = digest
        return digest


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@dataclass
class Fault:
    pattern: str
    status: int = 0          # an HTTP error to answer with
    delay_s: float = 0.0     # or a stall before answering
    times: int = 1
    body: bytes | None = None  # or this answer (200), whatever was asked
    drip_s: float = 0.0        # the answer a byte at a time, this long apart
    endless: bool = False      # or an answer that never ends (it claims a huge length)


class HubServer:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.faults: list[Fault] = []
        self.bytes_sent: Counter[str] = Counter()
        self.requests: list[tuple[str, str, str]] = []  # method, path, auth header
        self.in_flight = 0      # file downloads being answered now
        self.most_in_flight = 0  # the most at once: how many connections a client opened
        self.file_delay_s = 0.0  # a stall inside each file answer, so downloads overlap
        self.lock = threading.Lock()
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def total_bytes(self) -> int:
        return sum(self.bytes_sent.values())

    def _fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and re.search(fault.pattern, path):
                    fault.times -= 1
                    return fault
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def send(self, status: int, body: bytes, headers: dict[str, str] | None = None,
                     head: bool = False) -> None:
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)
                    with server.lock:
                        server.bytes_sent[urlparse(self.path).path] += len(body)

            def error(self, status: int, code: str, head: bool) -> None:
                self.send(status, json.dumps({"error": code}).encode(),
                          {"X-Error-Code": code, "X-Error-Message": code,
                           "Content-Type": "application/json"}, head)

            def handle_one(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                with server.lock:
                    server.requests.append((self.command, path,
                                            self.headers.get("Authorization", "")))
                fault = server._fault(path)
                if fault is not None:
                    if fault.delay_s:
                        time.sleep(fault.delay_s)
                    if fault.status:
                        self.send(fault.status, b"{}", {"Retry-After": "0"}, head)
                        return
                    if fault.body is not None or fault.endless:
                        self.hostile(fault)
                        return
                api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path)
                blob = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                # the file listing `hf download` (snapshot_download) asks for
                tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/.*)?", path)
                if tree is not None:
                    api = None
                match = tree or api or blob
                if match is None:
                    self.error(404, "RepoNotFound", head)
                    return
                repo = server.repos.get(match.group(1))
                if repo is None:
                    self.error(404, "RepoNotFound", head)
                    return
                if repo.gated and self.headers.get("Authorization") != f"Bearer {repo.token}":
                    self.error(403, "GatedRepo", head)
                    return
                revision = match.group(2) or "main"
                commit = repo.refs.get(revision, revision)
                if commit not in repo.commits:
                    self.error(404, "RevisionNotFound", head)
                    return
                files = repo.commits[commit]
                if tree:
                    body = json.dumps([
                        {"type": "file", "path": name, "size": len(data),
                         "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
                        for name, data in sorted(files.items())]).encode()
                    self.send(200, body, {"Content-Type": "application/json"}, head)
                    return
                if api:
                    body = json.dumps({
                        "id": match.group(1), "modelId": match.group(1), "sha": commit,
                        "private": False, "disabled": False, "gated": repo.gated and "manual",
                        "tags": [], "downloads": 0, "likes": 0,
                        "siblings": [{"rfilename": name, "size": len(data)}
                                     for name, data in sorted(files.items())]}).encode()
                    self.send(200, body, {"Content-Type": "application/json"}, head)
                    return
                name = match.group(3)
                if name not in files:
                    self.error(404, "EntryNotFound", head)
                    return
                data = files[name]
                if not head:
                    with server.lock:
                        server.in_flight += 1
                        server.most_in_flight = max(server.most_in_flight, server.in_flight)
                try:
                    if not head and server.file_delay_s:
                        time.sleep(server.file_delay_s)
                    self.send_file(data, commit, head)
                finally:
                    if not head:
                        with server.lock:
                            server.in_flight -= 1

            def hostile(self, fault: Fault) -> None:
                """What a broken or hostile server sends: a drip, an endless body, or
                a body that is not the hub's answer."""
                send(self, Answer(body=fault.body or b"", drip_s=fault.drip_s,
                                  endless=fault.endless,
                                  headers={"X-Repo-Commit": "0" * 40}))

            def send_file(self, data: bytes, commit: str, head: bool) -> None:
                headers = {"X-Repo-Commit": commit,
                           "ETag": '"' + hashlib.sha256(data).hexdigest() + '"',
                           "Accept-Ranges": "bytes"}
                ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if ranged and not head:
                    start = int(ranged.group(1))
                    end = min(int(ranged.group(2) or len(data) - 1), len(data) - 1)
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    self.send(206, data[start:end + 1], headers)
                    return
                self.send(200, data, headers, head)

            def do_GET(self) -> None:
                self.handle_one(head=False)

            def do_HEAD(self) -> None:
                self.handle_one(head=True)

        return Handler
