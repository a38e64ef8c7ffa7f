"""Tests of pageindex.job: the Spark batch job and its task packing."""
