"""Training stages, one module per CLI verb: recipe in, trained model in the run directory out."""
