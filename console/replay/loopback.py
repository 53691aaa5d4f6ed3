"""Shared pieces of the package's loopback HTTP servers (demo tools, demo LLM, replay)."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1"


class QuietThreadingHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads, no join on close, and a client that hung up is not an error."""

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None


class NoDelayHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler that sends without Nagle's delay and never logs to stderr."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body are separate writes; without this Nagle adds ~40 ms per response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return None
