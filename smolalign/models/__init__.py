"""Model sources (directory, hub id, GGUF, bundled short names), loading, and saving the trained result."""
