"""Run directories: where a run writes, refusing to clobber, resuming, and what it records about itself."""
