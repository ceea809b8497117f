"""botocore's credentials behind aiodynamo's `Credentials` interface.

aiodynamo signs every DynamoDB request with the key its `Credentials` hands it at that
moment. Ours asks botocore's credential chain (a botocore session's `get_credentials`):
environment, shared files and profiles, SSO, web identity (EKS), ECS and EC2 roles, the
credential process, as the AWS CLI resolves them. Refreshable credentials are refreshed by
botocore on its own schedule (`RefreshableCredentials.refresh_needed`); a refresh may wait
on the network (STS, the container or instance metadata), so it runs on a worker thread and
never blocks the event loop. Between refreshes a key is read without leaving the loop.

An endpoint this process started (moto, a test's DynamoDB Local) takes throwaway static
credentials instead (`local_key`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import botocore.session
from aiodynamo.credentials import Credentials, Key
from botocore.credentials import ReadOnlyCredentials, RefreshableCredentials

# Credentials for an endpoint this process started (moto, a test's DynamoDB Local): any do.
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}


def local_key() -> Key:
    return Key(LOCAL_CREDENTIALS["aws_access_key_id"], LOCAL_CREDENTIALS["aws_secret_access_key"])


class StaticKey(Credentials):
    """One key for the process's life (an endpoint it started)."""

    def __init__(self, key: Key) -> None:
        self.key = key

    async def get_key(self, http: Any) -> Key | None:
        return self.key

    def invalidate(self) -> bool:
        return False

    def is_disabled(self) -> bool:
        return False


class BotocoreCredentials(Credentials):
    """The key botocore's chain resolves now: rotated as botocore refreshes it.

    `session` makes the botocore session whose chain is asked (a fresh one by default, so a
    process restored from a snapshot resolves again after `reset`)."""

    def __init__(
        self, session: Callable[[], botocore.session.Session] = botocore.session.get_session
    ) -> None:
        self._session = session
        self._credentials: Any = None  # botocore's Credentials, once resolved
        self._key: Key | None = None
        self._lock = threading.Lock()

    async def get_key(self, http: Any) -> Key | None:
        credentials = self._credentials
        if credentials is None:
            # The chain may read files or ask the metadata service: off the loop.
            credentials = await asyncio.to_thread(self._resolve)
            if credentials is None:
                return None  # none yet: the next call asks again
        if isinstance(credentials, RefreshableCredentials) and credentials.refresh_needed():
            frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
        else:
            frozen = credentials.get_frozen_credentials()
        return self._key_of(frozen)

    def _resolve(self) -> Any:
        with self._lock:
            if self._credentials is None:
                self._credentials = self._session().get_credentials()
            return self._credentials

    def _key_of(self, frozen: ReadOnlyCredentials) -> Key:
        key = self._key
        if key is None or (key.id, key.secret, key.token) != tuple(frozen):
            key = self._key = Key(str(frozen.access_key), str(frozen.secret_key), frozen.token)
        return key

    @property
    def resolved(self) -> Any:
        """botocore's credentials as the chain resolved them; None until a call resolves them."""
        return self._credentials

    def reset(self) -> None:
        """Forget what the chain resolved: the next call resolves again."""
        self._credentials = None
        self._key = None

    def invalidate(self) -> bool:
        # botocore refreshes before expiry itself; an expired-token answer is retried (or
        # not) by our retry policy, which sends the call again with botocore's key of then.
        return False

    def is_disabled(self) -> bool:
        return False
