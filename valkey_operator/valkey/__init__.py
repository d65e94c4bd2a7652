"""Talking to Valkey servers: the operator's admin client (no Kubernetes in here)."""
