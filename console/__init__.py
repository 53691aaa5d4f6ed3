"""truva-console: the Textual debugging console and its headless CLI twins."""
