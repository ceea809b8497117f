"""The app on uvicorn in a thread, with `serve`'s options."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from support import WAIT, until

if TYPE_CHECKING:
    from graph_api.graph.engine.context import Services


@contextlib.contextmanager
def uvicorn_in_thread(
    services: Services, environ: Mapping[str, str] | None = None, pipeline: bool = False
) -> Iterator[int]:
    """The app on uvicorn on a loopback port with `serve`'s options, in a thread; its port.
    `environ` stands for the process's environment (FORWARDED_ALLOW_IPS); with `pipeline`,
    the app's lifespan runs its event pipeline (subscriptions), and the port is yielded once
    its reader reads. uvicorn's own pings are off: no test here waits 20 s for one."""
    import uvicorn

    from graph_api.http.app import create_app
    from graph_api.http.hosting import uvicorn_limits

    config = uvicorn.Config(
        create_app(services),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="on" if pipeline else "off",
        ws_ping_interval=None,
        **uvicorn_limits(services.settings, environ or {}),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        until(lambda: server.started or not thread.is_alive(), "uvicorn")
        assert server.started
        if pipeline:
            events = services.events
            until(lambda: events.reader is not None and events.reader.reading.is_set(), "reader")
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(WAIT)
