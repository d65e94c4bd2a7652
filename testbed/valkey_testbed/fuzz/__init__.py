"""Fuzzed input against the real API server and a running operator (`python -m valkey_testbed
fuzz`): hypothesis writes ValkeyImages, Configs, Roles and Clusters, valid, near-valid and hostile;
each must be refused at admission naming a field, or be reconciled into a status that explains it,
while the operator process stays alive, quiet and flat in memory.

strategies.py draws the writes, verdicts.py judges answers and statuses (pure), watch.py runs and
measures the operator process, runner.py drives the rounds and counts.
"""
