"""Tests of pageindex.cli: the command line, its targets, output and progress line."""
