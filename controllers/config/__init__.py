"""ValkeyConfig: chain resolution (pure) and its reconciler."""
