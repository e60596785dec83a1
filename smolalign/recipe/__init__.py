"""Recipes: YAML with named sections, `extends:` composition, `--set` overrides, validation with did-you-mean."""
