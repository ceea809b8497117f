"""graphql-http's GraphQL-over-HTTP audit against the real server: 0 errors, 0 warnings, and
0 notices (the MAYs pass too: a notice once hid a 500 for a non-string operationName)."""

from __future__ import annotations

from support import npm_package, tool

from tools import http_audit


def test_graphql_over_http_audit_has_no_errors_warnings_or_notices() -> None:
    tool("node", "apt-get install nodejs npm")
    npm_package(http_audit.AUDIT)
    result = http_audit.run()
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert ", 0 errors, 0 warnings, 0 notices" in report, report
