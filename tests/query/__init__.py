"""Tests of pageindex.query: the where-clause parser and the page-skipping lookup."""
