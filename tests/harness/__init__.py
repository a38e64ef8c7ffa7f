"""Tests of the test harness itself: fixtures, oracles and the table generator in tests/helpers."""
