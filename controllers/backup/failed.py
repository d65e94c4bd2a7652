"""The one error a backup pass ends in: it becomes the backup's Failed phase with its reason."""

from __future__ import annotations


class BackupFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
