"""The wire's one error boundary: what aiodynamo and aiohttp raise, as the project's errors.

Every DynamoDB call goes through aiodynamo's `Client.send_request` on aiohttp; what they raise
is mapped here once, into the errors the rest of the store speaks (botocore's, which the
change stream's client raises too, and which `store/retry.py` and `store/client.py` read):

- DynamoDB's refusal (an `AIODynamoError` made from its error answer) is a `ClientError`
  carrying what botocore would parse from the same answer: the code, the message, the HTTP
  status, and a cancelled transaction's `CancellationReasons` in action order;
- an answer of another server (a 4xx without DynamoDB's `__type`) keeps its status as its
  code, as botocore reads it (`retry.not_dynamodb`);
- aiohttp's failures are botocore's for the same failure, as aiobotocore mapped them: a
  refused or unresolvable endpoint `EndpointConnectionError`, TLS `SSLError`, a timeout
  `ConnectTimeoutError`/`ReadTimeoutError`, a cut or dropped connection
  `ConnectionClosedError`, anything else `HTTPClientError`;
- no credentials is botocore's `NoCredentialsError`.

`mapping(url, operation)` wraps a call: anything else passes through unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
from aiodynamo import errors as dynamo_errors
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ProxyConnectionError,
    ReadTimeoutError,
    SSLError,
)

# aiodynamo makes these from the status alone (DynamoDB's 500 and 503).
_BY_STATUS: dict[type[Exception], tuple[int, str]] = {
    dynamo_errors.InternalDynamoError: (500, "InternalServerError"),
    dynamo_errors.ServiceUnavailable: (503, "ServiceUnavailable"),
}


def client_error(status: int, data: dict[str, Any], operation: str) -> ClientError:
    """botocore's `ClientError` for DynamoDB's error answer `data` (its JSON body)."""
    code = str(data.get("__type", "")).rpartition("#")[2] or str(status)
    message = str(data.get("message", data.get("Message", "")))
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}},
    }
    for name, value in data.items():  # modeled members: CancellationReasons, Item
        if name not in ("__type", "message", "Message"):
            response[name] = value
    if "message" in data:
        response["message"] = data["message"]
    return ClientError(response, operation)  # type: ignore[arg-type]


def _unknown(error: dynamo_errors.UnknownError, operation: str) -> ClientError:
    try:
        data = json.loads(error.body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        data = {"message": error.body[:200].decode("utf-8", "replace")}
    return client_error(error.status, data, operation)


def from_dynamodb(error: dynamo_errors.AIODynamoError, operation: str) -> Exception:
    """The project's error for aiodynamo's."""
    if isinstance(error, dynamo_errors.UnknownError):
        return _unknown(error, operation)
    if isinstance(error, dynamo_errors.NoCredentialsFound):
        return NoCredentialsError()
    by_status = _BY_STATUS.get(type(error))
    if by_status is not None:
        status, code = by_status
        return client_error(status, {"__type": code}, operation)
    data = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
    if not data.get("__type"):  # made by aiodynamo itself, not from an answer
        return HTTPClientError(error=error)
    return client_error(400, data, operation)


def from_aiohttp(error: BaseException, url: str) -> Exception:
    """botocore's error for aiohttp's (or a timeout's) failure to send or read."""
    if isinstance(error, aiohttp.ClientSSLError):
        return SSLError(endpoint_url=url, error=error)
    if isinstance(error, aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        return ProxyConnectionError(proxy_url="(proxy)", error=error)
    if isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return ConnectionClosedError(endpoint_url=url, error=error)
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return ConnectTimeoutError(endpoint_url=url, error=error)
    if isinstance(error, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return ReadTimeoutError(endpoint_url=url, error=error)
    if isinstance(error, aiohttp.ClientConnectorError):
        return EndpointConnectionError(endpoint_url=url, error=error)
    if isinstance(error, aiohttp.ClientOSError):  # reset by the peer mid-request
        return ConnectionClosedError(endpoint_url=url, error=error)
    return HTTPClientError(error=error)


@contextlib.contextmanager
def mapping(url: str, operation: str) -> Iterator[None]:
    """Around one call: aiodynamo's and aiohttp's errors raised as the project's."""
    try:
        yield
    except dynamo_errors.AIODynamoError as error:
        raise from_dynamodb(error, operation) from error
    except (TimeoutError, aiohttp.ClientError) as error:
        raise from_aiohttp(error, url) from error
