"""Backups of ValkeyClusters to S3-compatible storage and restores from them (SPEC 1.7)."""
