"""Tests of pageindex.scan: page walk, level streams, value decoding, chunk scans, memory."""
