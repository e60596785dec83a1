"""Preference pairs from a strong and a weak model: prompts in, `prompt`/`chosen`/`rejected` rows with provenance out.

`build.generate_pairs` runs the pipeline; `backends` holds the generators (transformers, vLLM in-process, any
OpenAI-compatible server); `prompts` reads and filters the prompts; `output` owns the files (the resumable work log,
the atomic final write, the cache path).
"""
