"""Verifiable reward functions for `smolalign rl` (math, code, format, length), plain functions named in recipes."""
