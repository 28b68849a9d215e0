"""The checks' pure decisions: facts in, a Verdict out (no Kubernetes, no I/O)."""
