"""`make http-audit`: graphql-http's GraphQL-over-HTTP audit (tests/http/http-audit/, pinned)
against `graph-api serve` on a loopback port. Exits non-zero on any error or warning."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tools.api_server import serving
from tools.node import ROOT, npm_ci

AUDIT = ROOT / "tests" / "http" / "http-audit"


def run() -> subprocess.CompletedProcess[str]:
    """Install the audit, serve the API, audit it; the audit's exit code and output."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed for the GraphQL-over-HTTP audit")
    npm_ci(AUDIT)
    with serving() as url:
        return subprocess.run(
            [node, str(AUDIT / "audit.mjs"), f"{url}/graphql"],
            capture_output=True,
            text=True,
            timeout=120,
        )


def main() -> int:
    result = run()
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
