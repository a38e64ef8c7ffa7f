"""Lakehouse tables: plan files from a table's snapshot and commit their indexed copies to its log.

Only pageindex.job and the CLI import this package; the formats' libraries are optional extras.
"""
