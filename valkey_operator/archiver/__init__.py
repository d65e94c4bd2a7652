"""Continuous archiving of a Valkey node's append-only history to object storage (issue 41, item 1).

Runs beside valkey-server in its pod, never in the operator: every write of the node would
otherwise pass through the operator. It follows the node's multi-part AOF directory (a base and
incremental files named by its manifest) and ships each file's new bytes as they are written.
A ValkeyCluster's spec.backup.pointInTime runs it in every Valkey pod (controllers/cluster/render/
archiver.py).
"""
