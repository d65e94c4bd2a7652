"""`python -m valkey_operator.kubectl`: the same as the `kubectl-valkey` console script."""

from valkey_operator.kubectl.cli import main

raise SystemExit(main())
