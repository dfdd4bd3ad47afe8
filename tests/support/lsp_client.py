"""A small Language Server Protocol client for the tests: JSON-RPC 2.0 with Content-Length framing
over a child process's stdin and stdout (no LSP library: the messages are written out here, so
the tests check the server's wire format, not a library's view of it)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class LspClient:
    """A server process (`python3 -m pgraph lsp ...` by default) and the messages it sent."""

    def __init__(self, cwd: Path, args: list[str] | None = None, env: dict[str, str] | None = None,
                 command: list[str] | None = None) -> None:
        cmd = command or [sys.executable, "-m", "pgraph", "lsp", *(args or [])]
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env or dict(os.environ), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0
        self.buffer = b""
        self.received: list[dict[str, Any]] = []

    # ---- framing ----
    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read_message(self, deadline: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if sep:
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    return json.loads(rest[:length])
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk

    def wait_for(self, pred: Any, timeout: float = 60.0) -> dict[str, Any]:
        """The first message (new or already received and not yet taken) for which `pred` is true."""
        for i, m in enumerate(self.received):
            if pred(m):
                return self.received.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m is None:
                raise TimeoutError(f"no such message within {timeout} s; got {self.received!r}")
            if pred(m):
                return m
            self.received.append(m)

    # ---- requests and notifications ----
    def request(self, method: str, params: Any, timeout: float = 60.0) -> Any:
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def initialize(self, root: Path) -> Any:
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                             "capabilities": {"textDocument": {"publishDiagnostics": {
                                                 "relatedInformation": True}}}})
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str | None = None, version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": path.as_uri(), "languageId": "pgl", "version": version,
            "text": path.read_text(encoding="utf-8") if text is None else text}})

    def diagnostics(self, path: Path, timeout: float = 60.0, version: int | None = None) -> list[dict[str, Any]]:
        """The next diagnostics published for `path` (for `version`, when given)."""
        uri = path.as_uri()
        m = self.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri
                          and (version is None or m["params"].get("version") == version), timeout)
        return list(m["params"]["diagnostics"])

    def close(self) -> int:
        """shutdown, exit; the exit code of the server (killed after 10 s)."""
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            return self.proc.wait(timeout=10)
        except (TimeoutError, OSError, subprocess.TimeoutExpired, RuntimeError):
            self.proc.kill()
            self.proc.wait()
            return -9
        finally:
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
