"""`python -m pageindex` runs the command line.

Same as the `pageindex` console script.
"""
import sys

from .cli import main

sys.exit(main())
