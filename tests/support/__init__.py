"""Loopback test servers shared by the suite: scripted tool servers and an OpenAI-compatible LLM."""
