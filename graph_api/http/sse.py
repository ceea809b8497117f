"""GraphQL over SSE's framing: Strawberry's transport, its lines ended with LF.

The SSE format allows CRLF, LF or CR line ends, and Strawberry writes CRLF; urql's fetch
exchange (`@urql/core` 6) finds events by splitting on "\\n\\n" and so never saw one of
ours. LF alone is what every client reads (graphql-sse and browsers' EventSource too).
tests/project/test_clients.py runs urql's subscription against the server.
"""

from __future__ import annotations

from graph_api.internals.strawberry import SSETransport


class LineFeedSSETransport(SSETransport):
    def encode_event(self, event: str, data: str | None = None) -> str:
        return super().encode_event(event, data).replace("\r\n", "\n")

    def encode_comment(self, comment: str) -> str:
        return super().encode_comment(comment).replace("\r\n", "\n")
