"""Tests against the real llama.cpp servers (issue 17)."""
