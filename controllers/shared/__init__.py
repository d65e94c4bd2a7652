"""What more than one controller needs, owned by none of them (docs/cluster-internals.md, Layers).

Naming, pod layout, the internal credentials and TLS Secrets, the observation of Valkey pods and
their probing, config resolution, the backup format and its storage, the pod index: each
controller package imports from here and never from another controller's package
(tests/unit/test_controller_boundaries.py). Nothing here imports a controller.
"""
