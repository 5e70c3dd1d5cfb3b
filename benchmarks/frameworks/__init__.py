"""Data-parallel framework adapters; each implements `base.Framework` and nothing else."""
