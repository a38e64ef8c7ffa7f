"""The Spark batch job: files packed into tasks, each file retrofitted into a report record, and
the report and summary written at the end. `pageindex.job.spark.main` is the entry point."""
