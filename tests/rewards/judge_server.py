"""A real OpenAI-compatible /v1/chat/completions server on 127.0.0.1 that fakes the paid judge model.

Replies come from a script: each entry is a reply text, an int HTTP status to fail with, or a function of the
request body returning either (a fake judge that reads the prompt). When the
script runs out, the last entry repeats. The server records every request (body and headers) and the
highest number of requests it held at once.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JudgeServer:
    def __init__(self, script, delay: float = 0.0):
        self.script = list(script)
        self.delay = delay
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next(self):
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    reply = server._next()
                    if callable(reply):
                        reply = reply(body)
                    if isinstance(reply, int):
                        data = json.dumps({"error": {"message": f"scripted failure {reply}", "type": "server_error"}}).encode()
                        self.send_response(reply)
                    else:
                        data = json.dumps({
                            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model", "judge"),
                            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                        }).encode()
                        self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        return Handler
