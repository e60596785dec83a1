"""`smolalign sweep`: a grid of runs of one recipe, each evaluated with its `eval:` section and compared."""
