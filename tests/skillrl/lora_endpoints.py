"""A loopback stand-in for vLLM's runtime LoRA endpoints that records every request.

vLLM's contract: ``POST /v1/load_lora_adapter`` with ``{"lora_name", "lora_path"}`` and
``POST /v1/unload_lora_adapter`` with ``{"lora_name"}``, answered 200 with a line of text, or
404 when the server runs without ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder(BaseHTTPRequestHandler):
    """Answers like vLLM's LoRA endpoints (200 and a line of text), or with ``status``."""

    requests: list[tuple[str, dict]] = []
    status = 200

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.requests.append((self.path, json.loads(body)))
        self.send_response(Recorder.status)
        self.end_headers()
        self.wfile.write(b"Success" if Recorder.status == 200 else b'{"detail":"Not Found"}')

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def lora_server() -> Iterator[str]:
    """Serve :class:`Recorder` on a free loopback port; yield its root URL."""
    Recorder.requests, Recorder.status = [], 200
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
