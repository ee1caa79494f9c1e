"""Where and how a model runs: the one checkpoint loader, device and precision, Accelerate sharding, the feature store, the KV-cache keyword, load options, checkpoint records, batching."""
