"""Real servers for the tool tests: the calculator and a probe server (stdio and HTTP on loopback),
a loopback HTTP server that only answers 503, and a third-party MCP server from npm."""

from __future__ import annotations

import asyncio
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PROBE = str(HERE / "servers" / "probe_server.py")
REPO = HERE.parent.parent
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_INSTALL = f"npm install --prefix .venv/npm @modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
FILESYSTEM_VERSION = "2026.8.31"
FILESYSTEM_INSTALL = f"npm install --prefix .venv/npm @modelcontextprotocol/server-filesystem@{FILESYSTEM_VERSION}"


def run(coro):
    return asyncio.run(coro)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen on port {port} within {deadline}s")


def start_http(args: list[str]):
    port = free_port()
    proc = subprocess.Popen([sys.executable, *args, "--http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_port(port, proc)
    return proc, f"http://127.0.0.1:{port}/mcp"


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def calc_http():
    proc, url = start_http(["-m", "agentrl_calculator"])
    yield url
    stop(proc)


@pytest.fixture(scope="session")
def probe_http():
    proc, url = start_http([PROBE])
    yield url
    stop(proc)


@pytest.fixture
def calc_stdio():
    return {"command": sys.executable, "args": ["-m", "agentrl_calculator"]}


@pytest.fixture
def probe_stdio():
    return {"command": sys.executable, "args": [PROBE]}


class _Always503(http.server.BaseHTTPRequestHandler):
    hits = 0

    def _answer(self):
        type(self).hits += 1
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        body = b"service unavailable"
        self.send_response(503)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def always_503():
    handler = type("Handler", (_Always503,), {"hits": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def everything_server():
    """@modelcontextprotocol/server-everything, installed from npm (see EVERYTHING_INSTALL)."""
    env = os.environ.get("AGENTRL_MCP_EVERYTHING")
    path = Path(env) if env else REPO / ".venv" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
    if not path.exists():
        pytest.skip(f"third-party MCP server not installed: run `{EVERYTHING_INSTALL}` in the repo root")
    return {"command": str(path), "args": ["stdio"]}


@pytest.fixture(scope="session")
def filesystem_server():
    """@modelcontextprotocol/server-filesystem from npm (see FILESYSTEM_INSTALL): the command, without its folder."""
    path = REPO / ".venv" / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not path.exists():
        pytest.skip(f"third-party MCP server not installed: run `{FILESYSTEM_INSTALL}` in the repo root")
    return str(path)


class _FlakyProxy(http.server.BaseHTTPRequestHandler):
    """Forwards to a real MCP server, but answers the next tools/call POSTs with the statuses in ``fail``."""

    upstream = ""
    fail: list = []
    failed = 0
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # no server-to-client stream: allowed by the spec, keeps the proxy simple
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def _forward(self):
        import urllib.error
        import urllib.request

        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        cls = type(self)
        if self.command == "POST" and b'"tools/call"' in body and cls.fail:
            status = cls.fail.pop(0)
            cls.failed += 1
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        skip = {"host", "content-length", "connection", "accept-encoding"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        request = urllib.request.Request(cls.upstream, data=body or None, headers=headers, method=self.command)
        try:
            response = urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            response = exc
        data = response.read()
        self.send_response(response.status if hasattr(response, "status") else response.code)
        for k, v in response.headers.items():
            if k.lower() not in {"content-length", "transfer-encoding", "connection", "date", "server"}:
                self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_DELETE = _forward

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_calc(calc_http):
    handler = type("Proxy", (_FlakyProxy,), {"upstream": calc_http, "fail": [], "failed": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()


RFT_SERVER = str(HERE / "servers" / "rft_server.py")


def start_rft(port: int | None = None, **env):
    """The Agent RFT tutorial's FastAPI tool server on loopback; returns (process, base URL)."""
    port = port or free_port()
    proc = subprocess.Popen([sys.executable, RFT_SERVER, "--port", str(port)], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def rft_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("rft") / "calls.jsonl"
    proc, base = start_rft(RFT_LOG=str(log), FLAKY_FAILS="2")
    yield base, log
    stop(proc)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A one-layer Qwen2 with the demo's offline tokenizer: enough for `agentrl train --dry-run` to check a config."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentrl.demo.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("model")
    tok = train_tokenizer(["What was Acme's revenue? 842 million dollars."] * 20)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    Qwen2ForCausalLM(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return root
