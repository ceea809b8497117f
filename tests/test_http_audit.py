"""graphql-http's GraphQL-over-HTTP audit against the real server: 0 errors, 0 warnings."""

from __future__ import annotations

from support import npm_package, tool

from tools import http_audit


def test_graphql_over_http_audit_has_no_errors_or_warnings() -> None:
    tool("node", "apt-get install nodejs npm")
    npm_package(http_audit.AUDIT)
    result = http_audit.run()
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert ", 0 errors, 0 warnings," in report, report
