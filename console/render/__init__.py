"""What the CLI and the TUI both show, computed once: formats and view models; no Textual."""
