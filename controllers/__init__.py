"""Reconcilers for ValkeyImage, ValkeyConfig, ValkeyRole and ValkeyCluster."""
