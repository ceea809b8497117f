// A front end on another origin calls the API, in Debian's headless Chromium (playwright-core
// drives it): this script serves a page on a port of its own, as a front end's dev server
// would, and the page POSTs a query and a mutation to the API with fetch. The browser lets
// the page read the answers only because the API's CORS allows its origin (`make run`'s
// default: localhost on any port); the mutation's JSON body needs a preflight first.
// The same page from an origin the API does not allow (front.example, mapped to 127.0.0.1)
// gets nothing, and its mutation is never sent.
//
// Usage: node cors.mjs URL PLAN_JSON, URL the API's /graphql and PLAN_JSON
//   {"studentId": ID, "name": NEW_NAME, "refusedName": NAME}.
// CHROMIUM overrides the browser (default /usr/bin/chromium). Exits 1 on any failure.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [api, planJson] = process.argv.slice(2);
if (!api || !planJson) {
  console.error('usage: node cors.mjs URL PLAN_JSON');
  process.exit(2);
}
const plan = JSON.parse(planJson);
const TIMEOUT = 60_000; // bounds waits on conditions, generously, for a busy machine

// The front end: it runs the plan's query and mutation against `api`, and shows the outcome.
const PAGE = `<!doctype html>
<meta charset="utf-8"><title>front end</title>
<pre id="out">running</pre>
<script type="module">
const plan = ${JSON.stringify(plan)};
const api = ${JSON.stringify(api)};
const out = document.getElementById('out');
async function graphql(query, variables) {
  const response = await fetch(api, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, requestId: response.headers.get('x-request-id'), body: await response.json() };
}
const renamed = location.hostname === 'front.example' ? plan.refusedName : plan.name;
try {
  const query = await graphql('query($id: ID!) { student(id: $id) { id name } }', { id: plan.studentId });
  const mutation = await graphql(
    'mutation($id: ID!, $name: String!) { updateStudent(id: $id, input: { name: $name }) { student { name } userErrors { code } } }',
    { id: plan.studentId, name: renamed },
  );
  out.textContent = JSON.stringify({ query, mutation });
} catch (error) {
  out.textContent = JSON.stringify({ error: String(error) });
}
out.dataset.done = 'yes';
</script>`;

const server = createServer((_, response) => {
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  response.end(PAGE);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = server.address().port;
const profile = mkdtempSync(join(tmpdir(), 'cors-e2e-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  timeout: TIMEOUT,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--host-resolver-rules=MAP front.example 127.0.0.1',
  ],
});

async function outcome(pageUrl) {
  const page = await context.newPage();
  await page.goto(pageUrl, { waitUntil: 'load', timeout: TIMEOUT });
  await page.waitForSelector('#out[data-done]', { timeout: TIMEOUT });
  const text = await page.textContent('#out');
  await page.close();
  return JSON.parse(text);
}

const failures = [];
try {
  // Allowed: a dev server on localhost, another port than the API's.
  const allowed = await outcome(`http://localhost:${port}/`);
  const { query, mutation } = allowed;
  if (query?.body?.data?.student?.id !== plan.studentId) failures.push(`query: ${JSON.stringify(allowed)}`);
  else console.log(`query from http://localhost:${port}: ${query.body.data.student.name}`);
  const written = mutation?.body?.data?.updateStudent;
  if (written?.student?.name !== plan.name || written.userErrors.length) {
    failures.push(`mutation: ${JSON.stringify(allowed)}`);
  } else console.log(`mutation from http://localhost:${port}: renamed to ${plan.name}`);
  if (!query?.requestId) failures.push('the X-Request-ID header was not exposed to the page');

  // Refused: an origin the API does not allow reads nothing, and writes nothing.
  const refused = await outcome(`http://front.example:${port}/`);
  if (!refused.error) failures.push(`front.example read an answer: ${JSON.stringify(refused)}`);
  else console.log(`from http://front.example:${port}: ${refused.error}`);
} catch (error) {
  failures.push(error.stack || String(error));
} finally {
  await context.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
for (const failure of failures) console.error(failure);
process.exit(failures.length ? 1 : 0);
