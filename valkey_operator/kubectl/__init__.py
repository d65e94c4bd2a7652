"""`kubectl valkey`: day-2 commands for ValkeyClusters that ask the operator, never Valkey.

Every command reads or writes Kubernetes objects only: requests (pause, switchover, restart,
backup) are annotations or objects the operator carries out with its own safety checks, and
`status` renders what the operator recorded. One module per command; `cli` parses and
dispatches, `kube` connects as kubectl does.
"""
