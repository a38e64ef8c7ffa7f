"""Whole-system suites: corpus, oracles, engines, output hashes, fuzzing, crash and fault
safety, bad input, concurrency, deployment and the package layers."""
