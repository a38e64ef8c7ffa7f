"""`python -m pageindex.job`: the Spark job on a local Spark, as the `pageindex-job` console script.

The same arguments and exit codes (pageindex-job --help).
"""
from pageindex.job.spark import console

if __name__ == "__main__":
    console()
