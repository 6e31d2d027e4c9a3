"""A TCP proxy to a PostgreSQL server that can go silent: a network partition behind a
load balancer, for tests. Run as ``python -m tests.support.frozen_proxy PORT UPSTREAM FLAG``;
it prints ``listening PORT`` once it listens (PORT 0: a free port, the one it printed).

UPSTREAM is ``host:port`` or a Unix socket path. While the file FLAG exists, nothing
is forwarded either way, and new connections are accepted and never answered.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time


def _pipe(src: socket.socket, dst: socket.socket, flag: str) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            while os.path.exists(flag):
                time.sleep(0.05)
            dst.sendall(data)
    except OSError:
        pass


def _upstream(where: str) -> socket.socket:
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(where)
        return s
    host, port = where.rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def main() -> None:
    port, upstream, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(50)
    print("listening", listener.getsockname()[1], flush=True)
    silent: list[socket.socket] = []
    while True:
        client, _ = listener.accept()
        if os.path.exists(flag):
            silent.append(client)
            continue
        server = _upstream(upstream)
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=_pipe, args=(a, b, flag), daemon=True).start()


if __name__ == "__main__":
    main()
