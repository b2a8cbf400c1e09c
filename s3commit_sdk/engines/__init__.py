"""Engines run a job's tasks: Spark (distributed) or in-process threads (pandas / arrow)."""
