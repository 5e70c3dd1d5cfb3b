"""Data loaders; each implements `base.Loader` and follows `sharding.shard_batches`."""
