"""Widgets of the truva-console TUI: tables, the filter bar and the attempt detail pane."""
