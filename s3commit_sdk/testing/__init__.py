"""Tooling for tests, demos and benchmarks: not a stable API, may change in any release.

``sandbox`` (the embedded default: moto's S3 server and a local Spark; the ``testing`` extra),
``rgw`` (Ceph RGW, a production S3 server), ``postgres`` (a PostgreSQL server, the Iceberg
SQL catalog's database), ``faultproxy`` (faults between boto3 and the server),
``faulty_store`` (a rename store with injected faults), ``crash`` (a driver, or a streaming
query's driver, killed at a chosen S3 request; ``stream_driver`` runs that query). Nothing here
is imported by the write path.
"""
