"""Training data: sources, mixtures, formats, tokenization with loss masks, packing, caching and preview."""
