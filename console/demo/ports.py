"""The demo's port layout and tool names, importable without the servers (the CLI's parser)."""

from __future__ import annotations

DEFAULT_BASE_PORT = 8101
TOOL_NAMES = ("travel", "stocks", "currency", "weather", "payments")
