"""Continuous archiving of a Valkey node's append-only history to object storage (issue 41, item 1).

Runs beside valkey-server in its pod, never in the operator: every write of the node would
otherwise pass through the operator. It follows the node's multi-part AOF directory (a base and
incremental files named by its manifest) and ships each file's new bytes as they are written.
Not yet wired into the product: no CRD field or chart value turns it on yet.
"""
