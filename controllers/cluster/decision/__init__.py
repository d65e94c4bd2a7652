"""The pure decision of a ValkeyCluster pass: decide(facts, now) and what it is made of."""
