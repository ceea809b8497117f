// The GraphQL-over-HTTP audit (graphql-http's serverAudits) of a running server.
// Usage: node audit.mjs http://127.0.0.1:PORT/graphql
// Prints one line per audit and a summary; exits 1 on any error (a failed MUST) or
// warning (a failed SHOULD). Notices (failed MAYs) are printed but pass.
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs URL');
  process.exit(2);
}

const MARK = { ok: 'ok    ', notice: 'NOTICE', warn: 'WARN  ', error: 'ERROR ' };
const counts = { ok: 0, notice: 0, warn: 0, error: 0 };

// One at a time: the order of the output is stable and the server is not flooded.
for (const { fn } of serverAudits({ url, fetchFn: fetch })) {
  const result = await fn();
  counts[result.status] += 1;
  let line = `${MARK[result.status]} ${result.id} ${result.name}`;
  if (result.status !== 'ok') {
    const body = await result.response.text().catch(() => '');
    line += `\n       ${result.reason} (status ${result.response.status}, ` +
      `content-type ${result.response.headers.get('content-type')}, body ${body.slice(0, 200)})`;
  }
  console.log(line);
}

console.log(
  `graphql-http audit of ${url}: ${counts.ok} ok, ${counts.error} errors, ` +
    `${counts.warn} warnings, ${counts.notice} notices`,
);
process.exit(counts.error || counts.warn ? 1 : 0);
