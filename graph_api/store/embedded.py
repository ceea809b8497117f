"""The embedded backend: moto's DynamoDB served over HTTP on a loopback port, in process.

It speaks the same wire protocol as DynamoDB, so the API's one data-access path is exercised
exactly as against DynamoDB Local or AWS. moto keeps everything in memory.

moto's transactions are neither atomic nor isolated under concurrent requests (a cancelled
TransactWriteItems restores a snapshot of the whole table, undoing writes committed
meanwhile), so the server takes a readers-writer lock: reads run together, a write runs
alone. DynamoDB itself needs none of this.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

_WRITES = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "CreateTable",
        "UpdateTable",
        "DeleteTable",
    }
)


class ReadWriteLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing and not self._readers)
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class SerializedWrites:
    """A WSGI wrapper: DynamoDB write operations exclusive, reads shared."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = ReadWriteLock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        operation = environ.get("HTTP_X_AMZ_TARGET", "").rpartition(".")[2]
        with self.lock.write() if operation in _WRITES else self.lock.read():
            return list(self.app(environ, start_response))  # the whole answer, under the lock


class EmbeddedDynamoDB:
    def __init__(self) -> None:
        # Imported late: only this backend needs moto.
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class Server(ThreadedMotoServer):
            # ThreadedMotoServer's own entry, with the app wrapped (moto is pinned).
            def _server_entry(self) -> None:
                app = SerializedWrites(DomainDispatcherApplication(create_backend_app))
                self._server = make_server(
                    self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
                )
                self._server_ready_event.set()
                self._server.serve_forever()

        # moto binds every interface by default; ours is for this machine only.
        self._server = Server(ip_address="127.0.0.1", port=0, verbose=False)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access line per call
        self.endpoint_url = ""

    def start(self) -> str:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        log.info("embedded DynamoDB (moto) listening on %s", self.endpoint_url)
        return self.endpoint_url

    def stop(self) -> None:
        self._server.stop()
