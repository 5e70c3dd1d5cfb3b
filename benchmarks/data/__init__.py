"""Synthetic datasets: a learnable JPEG ImageFolder (and, with the DALI loader, TFRecord shards)."""
