"""Screens of the truva-console TUI: the executions list and one execution in detail."""
