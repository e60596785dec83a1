"""`smolalign eval`: K answers per prompt in each reasoning mode from one or more models, scored with the rewards of
`rewards/`, summarised with bootstrap intervals over prompts and paired differences to a baseline.

`inputs` reads and checks everything before a model loads; `generate` samples and scores; `compliance` defines
what obeying a mode means; `metrics` holds the statistics; `report` writes the tables, eval.json and the chart.
"""
