"""Multi-node launch on Slurm: the request and its checks, the recipe checked for the cluster, the sbatch script."""
