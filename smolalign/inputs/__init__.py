"""What a run reads before it is resolved: one data source read and fingerprinted, and where a `pairs:` section's
generated pairs are."""
