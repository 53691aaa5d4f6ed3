"""Headless re-running: replay of a recorded step with edited responses, rerun of an execution."""
