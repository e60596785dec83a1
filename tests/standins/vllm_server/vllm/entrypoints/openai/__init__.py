"""Part of the stand-in for vLLM's OpenAI server (tests/standins/vllm_server/vllm/entrypoints/openai/api_server.py)."""
