"""What the Node-driven tests (the HTTP audit, the browser test) need from the machine.

CI has node, npm and Debian's chromium (.ci/run installs chromium): there a missing tool
fails the test. A developer without them gets a skip that says what to install.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from tools.node import npm_ci


def missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must have it)", pytrace=False)
    pytest.skip(message)


def tool(name: str, install: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} is not installed ({install})")
    return found


def npm_package(folder: Path) -> None:
    """`npm ci` in `folder` when its node_modules is missing or older than its lock."""
    try:
        npm_ci(folder)
    except RuntimeError as error:
        missing(str(error))
