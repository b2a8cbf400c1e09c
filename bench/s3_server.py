"""moto's S3 service alone, for benchmarks: ``python -m bench.s3_server -H HOST -p PORT``.

``moto.server`` routes every request through a dispatcher that works out which of moto's
services it is for, under one global lock; profiled with py-spy, that and the per-request log
line took about a third of the server's time and serialized concurrent requests. Benchmarks only
speak S3 (plus ``/moto-api`` to reset), so this serves moto's S3 and API apps directly: the same
S3 implementation, without the dispatch cost that would otherwise be measured as ours.
It also turns Nagle's algorithm off, as S3's own front ends answer without that delay.
"""

from __future__ import annotations

import argparse
import ctypes
import logging

from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)


class _Handler(MotoRequestHandler):
    # werkzeug sends headers and body in separate writes: with Nagle's algorithm on, small
    # replies wait for the client's delayed ACK
    disable_nagle_algorithm = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    # moto holds each object in RAM and builds a completed object from copies of its parts; glibc
    # keeps freed blocks in its heap, so without this the server's RSS grows with every large
    # completion until a 4 GiB memory case runs it out of RAM (OOM-killed at 12.8 GB RSS).
    # Blocks of 1 MiB and more are mapped alone and handed back when freed (M_MMAP_THRESHOLD).
    ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 2**20)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    s3, api = create_backend_app("s3"), create_backend_app("moto_api")

    def app(environ, start_response):
        target = api if environ.get("PATH_INFO", "").startswith("/moto-api") else s3
        return target(environ, start_response)

    run_simple(args.host, args.port, app, threaded=True, request_handler=_Handler)


if __name__ == "__main__":
    main()
