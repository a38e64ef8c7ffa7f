"""Scanning a column chunk: walk its pages, decode levels and values, count rows and nulls.

What is learned by reading the data; the index stage turns it into bounds.
"""
