"""aiobotocore's aiohttp session, with a bound on what one response may hold.

aiobotocore reads a whole response body into memory before botocore parses it, whatever its
`Content-Length` says, and a chunked body until it ends. DynamoDB never answers with more
than 16 MB (a BatchGetItem's limit; a Query page is 1 MB), so a larger answer is not
DynamoDB's: a misbehaving proxy or endpoint, which could otherwise take the process's
memory. `CappedAIOHTTPSession` is the session class the client is configured with
(`AioConfig(http_session_cls=...)`, aiobotocore's documented choice of HTTP session): it
sends through aiobotocore's own session, asks it for the body unread (`stream_output`,
botocore's flag for a streamed answer), and reads it here, refusing at once a declared
length over the cap and cutting a body that grows past it.

`ResponseTooLarge` is an `HTTPClientError`, as a dropped connection is: the client maps it
to UNAVAILABLE and the retry policy may send the call again (store/retry.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiobotocore.awsrequest import AioAWSResponse
from aiobotocore.httpsession import AIOHTTPSession
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import ConnectionClosedError, HTTPClientError, ReadTimeoutError

MAX_BODY = 16 * 1024 * 1024  # bytes: the largest answer DynamoDB sends (BatchGetItem)


class ResponseTooLarge(HTTPClientError):
    fmt = "The answer from {endpoint_url} is larger than DynamoDB sends ({limit} bytes)"


class _Read:
    """A body read already, as `AioAWSResponse` reads its `content` from its `raw`."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self) -> bytes:
        return self.body


class CappedAIOHTTPSession(AIOHTTPSession):  # type: ignore[misc]
    """aiobotocore's `AIOHTTPSession`, a response's body read within `MAX_BODY`."""

    limit = MAX_BODY

    async def send(self, request: AWSPreparedRequest) -> Any:
        if request.stream_output:  # an answer meant to be streamed (none of DynamoDB's)
            return await super().send(request)
        request.stream_output = True  # the body left unread: read below
        try:
            response = await super().send(request)
        finally:
            request.stream_output = False
        body = await read_within(response.raw, self.limit, request.url)
        return AioAWSResponse(response.url, response.status_code, response.headers, _Read(body))


async def read_within(raw: aiohttp.ClientResponse, limit: int, url: str) -> bytes:
    """The body of `raw`, or `ResponseTooLarge` as soon as it says or shows it holds more than
    `limit` bytes (the connection is then closed, not read to its end). Failures while
    reading raise botocore's errors, as aiobotocore's session maps them while sending."""
    declared = raw.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raw.close()
        raise ResponseTooLarge(endpoint_url=url, limit=limit)
    body = bytearray()
    try:
        async for chunk in raw.content.iter_any():
            body += chunk
            if len(body) > limit:
                raise ResponseTooLarge(endpoint_url=url, limit=limit)
    except BaseException as error:  # a cancellation too: the connection is not reused
        raw.close()
        if isinstance(error, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
            raise ReadTimeoutError(endpoint_url=url, error=error) from error
        if isinstance(error, aiohttp.ClientError):  # payload cut, disconnected
            raise ConnectionClosedError(endpoint_url=url, error=error) from error
        raise
    return bytes(body)
