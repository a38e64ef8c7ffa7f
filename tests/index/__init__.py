"""Tests of pageindex.index: index building, header statistics, truncation, the tail writer."""
