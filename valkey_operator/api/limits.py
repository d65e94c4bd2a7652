"""The bounds and patterns admission enforces (also stated in the docs); the models' field metadata uses them.

Every string, list and map carries a bound so the CEL cost estimate stays
within the API server's budget. Patterns are RE2, for CEL `matches()`.
"""

from __future__ import annotations

MAX_NAME = 253  # a DNS subdomain: the name of any object these kinds refer to
MAX_CLUSTER_NAME = 50  # leaves room for the "-<shard>-<suffix>" of pod names within a 63-char hostname
MAX_SHARDS = 64
MAX_REPLICAS_PER_SHARD = 5
MAX_ACL_USERS = 64
MAX_PASSWORD_HASHES = 8
MAX_PULL_SECRETS = 16
MAX_PERMISSIONS = 16
MAX_PATTERNS = 16
MAX_PATTERN = 128
MAX_USERNAME = 64
MAX_VALKEY_SETTINGS = 64
MAX_VALKEY_VALUE = 1024
MAX_ANNOTATIONS = 64
MAX_ANNOTATION_VALUE = 4096
MAX_NODE_SELECTOR = 32
MAX_TOLERATIONS = 32
MAX_ZONES = 16
MAX_CONDITIONS = 16
MAX_STATUS_NODES = 512
MAX_MESSAGE = 32768
MAX_LABEL_VALUE = 63
MAX_QUALIFIED_NAME = 317  # 253-char DNS prefix + "/" + 63-char name
MAX_DNS_LABEL = 63
MAX_ENDPOINT = 2048
MAX_BUCKET = 63
MAX_OBJECT_KEY = 1024  # S3's limit on an object key, so also on a key prefix
MAX_REGION = 64
MAX_SCHEDULE = 128
MAX_KEEP = 1000
MAX_REASON = 128

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_1035 = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_1123 = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
RELEASE_VERSION = r"^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$"
USERNAME = r"^[A-Za-z0-9._-]+$"
PASSWORD_HASH = r"^[0-9a-f]{64}$"
SHA256_HEX = PASSWORD_HASH
HTTP_URL = r"^https?://[^\s/?#]+(/\S*)?$"
S3_BUCKET = r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$"  # and no "..": S3's bucket naming rules
S3_REGION = r"^[A-Za-z0-9._-]+$"
CRON_FIELDS = r"^\S+(\s+\S+){4}$"  # five fields; the controller parses them fully
CAMEL_CASE = r"^[A-Z][A-Za-z0-9]*$"
IMAGE_DIGEST = r"^sha256:[0-9a-f]{64}$"
ACL_PATTERN = r"^[^\s()[:cntrl:]]+$"
COMMAND = r"^[a-z0-9_-]+(\|[a-z0-9_-]+)?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
MAX_POLICY_PEERS = 16
MAX_SELECTOR_LABELS = 16
MAX_SELECTOR_EXPRESSIONS = 8
MAX_SELECTOR_VALUES = 16
MAX_CIDR = 64
MAX_CIDR_EXCEPT = 8
