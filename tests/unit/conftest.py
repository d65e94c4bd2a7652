"""Unit tests: pure, no control plane. This file puts tests/unit on the import path (pytest's
default import mode adds a conftest's directory), so every unit test imports the shared builders
of observed facts (observed.py) the same way, from any subdirectory."""
