"""The embedded backend: moto's DynamoDB served over HTTP on a loopback port, in process.

It speaks the same wire protocol as DynamoDB, so the API's one data-access path is exercised
exactly as against DynamoDB Local or AWS. moto keeps everything in memory.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class EmbeddedDynamoDB:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # imported late: only this backend needs it

        # moto binds every interface by default; ours is for this machine only.
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
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
