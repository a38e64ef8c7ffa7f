"""`python -m pageindex` runs the command line.

Same as the `pageindex` console script.
"""
from pageindex.cli import main
from pageindex.shutdown import leave, stops_cleanly

leave(stops_cleanly(main)())
