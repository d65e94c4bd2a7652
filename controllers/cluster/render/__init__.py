"""Pure rendering of everything a ValkeyCluster owns: pods, Service, ConfigMap, Secret, PDBs, ACLs."""
