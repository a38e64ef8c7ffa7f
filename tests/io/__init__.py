"""Tests of pageindex.io: ranged reads, atomic commit, input discovery."""
