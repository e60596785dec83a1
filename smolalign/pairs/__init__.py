"""Preference pairs generated from prompts: from a strong and a weak model, or graded (one model's several answers
per prompt ranked by a scorer); `prompt`/`chosen`/`rejected` rows (or KTO rows) with provenance out.

`build.generate_pairs` runs the pipeline (`graded` for graded pairs, with `scorer` for the weighted rewards and the
pick, and `graded_plan` for its plan rows); `backends` holds the generators (transformers, vLLM in-process, any
OpenAI-compatible server); `prompts` reads and filters the prompts; `output` owns the files (the resumable work log,
the atomic final write, the cache path); `report` the lengths and scores the reports show; `thresholds` checks
the margins and thresholds against what the rewards can score, before anything generates.
"""
