"""Queries over indexed files: predicates parsed from text or tuples, and the page-skipping lookup.
"""
