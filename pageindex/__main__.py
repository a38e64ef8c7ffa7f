"""`python -m pageindex` runs the command line.

Same as the `pageindex` console script.
"""
import sys

from pageindex.cli import main

sys.exit(main())
