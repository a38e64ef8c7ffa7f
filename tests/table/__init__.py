"""Tests of pageindex.table: what the table formats share (names of indexed copies)."""
