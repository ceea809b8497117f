"""The embedded backend: moto's DynamoDB served over HTTP on a loopback port, in process.

It speaks the same wire protocol as DynamoDB, so the API's one data-access path is exercised
exactly as against DynamoDB Local or AWS. moto keeps everything in memory.

moto alone is a mock, not a database: its transactions copy whole tables, its queries sort
the whole table, it ignores `ClientRequestToken`, and it does not isolate a transaction
from concurrent readers. `moto_fixes` (moto's backend) and `wsgi` (the server in front of
it) restore DynamoDB's behaviour; they are the only modules that know moto's internals.
"""

from __future__ import annotations

import logging

from graph_api.store.embedded.wsgi import Serialized

log = logging.getLogger(__name__)


class EmbeddedDynamoDB:
    def __init__(self) -> None:
        # Imported late: only this backend needs moto.
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
        from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        from graph_api.store.embedded import moto_fixes

        moto_fixes.apply()

        class Server(ThreadedMotoServer):
            # ThreadedMotoServer's own entry, with the app wrapped (moto is pinned).
            def _server_entry(self) -> None:
                # DynamoDB's app alone: moto's dispatcher lists its own package on every
                # request to find which of its services a request is for.
                app = Serialized(create_backend_app("dynamodb"))
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
