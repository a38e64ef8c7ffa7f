"""spark-submit entry point: gives every Parquet file under the inputs a page index.

Usage: spark-submit --py-files pageindex.zip jobs/retrofit_job.py --input PATH --in-place
"""
from pageindex.job.spark import main
from pageindex.shutdown import leave, stops_cleanly

if __name__ == "__main__":
    # spark-submit decides the master; do not override it here.
    leave(stops_cleanly(main)(master=None))
