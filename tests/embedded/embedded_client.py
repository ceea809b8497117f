"""The type of a plain boto3 client, as the embedded backend's tests drive it."""

from __future__ import annotations

from typing import Any

Client = Any  # a boto3 client (botocore makes its class at run time)
