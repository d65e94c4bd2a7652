"""The names a backup destination's Secret and its signing default use, without the API models.

restore-fetch runs in every restoring pod and imports this instead of valkey_operator.api.backup,
whose models pull in the controller core: a fraction of a second per pod start."""

from __future__ import annotations

DEFAULT_REGION = "us-east-1"
"""The region a destination without one signs for; applied by the controller, not the schema."""

CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
"""The keys of the Secret destination.credentialsSecretName names (restore-fetch's environment too)."""
CA_KEY = "ca.crt"
"""The key of the Secret destination.caSecretName names."""
