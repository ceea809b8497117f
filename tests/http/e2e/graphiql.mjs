// GraphiQL end to end, in Debian's headless Chromium (playwright-core drives it; no
// browser download). Opens the page and:
// 1. runs a query with a nested connection, waits for the expected values in the result
//    pane and saves a screenshot;
// 2. runs a subscription to a class's roster, waits until GraphiQL has sent it over its
//    websocket, enrols a student from a second connection (a plain POST from this process,
//    not the browser), waits for the event's values in the result pane and saves a second
//    screenshot;
// 3. (the embedded demo's role picker) for each role, clicks its button, runs `query`, and
//    waits for the result pane to show each `shown` text and none of the `hidden` ones.
// Each step runs when the plan has it.
//
// Usage: node graphiql.mjs URL PLAN_JSON, where PLAN_JSON is
//   {"query": {"expected": [TEXT...], "screenshot": PNG},
//    "subscription": {"studentId": ID, "classId": ID, "expected": [TEXT...], "screenshot": PNG},
//    "roles": {"query": TEXT, "steps": [{"role": ROLE, "shown": [TEXT...], "hidden": [TEXT...]}]}}
// CHROMIUM overrides the browser (default /usr/bin/chromium). Exits 1 on any failure, on a
// request or websocket to another origin (the page must need no CDN), and on a page or
// console error.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, planJson] = process.argv.slice(2);
if (!url || !planJson) {
  console.error('usage: node graphiql.mjs URL PLAN_JSON');
  process.exit(2);
}
const plan = JSON.parse(planJson);
const { studentId, classId } = plan.subscription ?? {};
const QUERY = `{
  student(id: "stu-0001") {
    name
    classes {
      edges { node { subject teacher { name } } }
    }
  }
}`;
const SUBSCRIPTION = `subscription {
  rosterChanged(classId: ${JSON.stringify(classId)}) {
    kind
    studentId
    student { name }
    class { studentCount }
  }
}`;
// Waits are on conditions; these only bound them, generously, for a busy machine.
const TIMEOUT = 60_000;
// The event normally shows in well under a second. The server keeps no outside sign of
// holding the subscription (nor of its stream reader reading yet), so when the event has
// not shown within PATIENCE the student leaves and joins again (doubling the patience each
// time): a retry never fails the test, and an earlier event arriving late still counts.
// Only EVENT_TIMEOUT with no event does.
const PATIENCE = 10_000;
const EVENT_TIMEOUT = 150_000;
const EDITOR = '.graphiql-query-editor .CodeMirror';
const RESPONSE = '.graphiql-response .CodeMirror';
const origin = new URL(url).origin;
const wsOrigin = origin.replace(/^http/, 'ws'); // GraphiQL's subscriptions: the same host
const offsite = [];
const problems = [];
const profile = mkdtempSync(join(tmpdir(), 'graphiql-e2e-')); // a fresh --user-data-dir

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  timeout: TIMEOUT,
  viewport: { width: 1400, height: 900 },
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
let failed = false;
try {
  // Anything not from the API itself is refused and reported: the page must work offline.
  await context.route('**/*', (route) => {
    const requested = route.request().url();
    if (new URL(requested).origin === origin) return route.continue();
    offsite.push(requested);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  // Routes do not see websockets: each is checked here, and its frames kept for a report.
  const sockets = [];
  const subscribed = new Promise((resolve) => {
    page.on('websocket', (ws) => {
      const socket = { url: ws.url(), received: [], closed: false };
      sockets.push(socket);
      if (new URL(ws.url()).origin !== wsOrigin) offsite.push(ws.url());
      ws.on('framereceived', ({ payload }) => socket.received.push(String(payload)));
      ws.on('socketerror', (error) => socket.received.push(`socket error: ${error}`));
      ws.on('close', () => (socket.closed = true));
      ws.on('framesent', ({ payload }) => {
        if (messageType(payload) === 'subscribe') resolve(ws);
      });
    });
  });

  await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT });
  await page.waitForSelector(EDITOR, { timeout: TIMEOUT });

  // 1. A query with a nested connection.
  if (plan.query) await query(page);
  // 2. A subscription, and an enrolment from another connection.
  if (plan.subscription) await subscription(page, subscribed, sockets);
  // 3. The role picker.
  if (plan.roles) await roles(page);
} catch (error) {
  failed = true;
  console.error(error.stack || String(error));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
for (const request of offsite) console.error(`request to another origin: ${request}`);
for (const problem of problems) console.error(problem);
process.exit(failed || offsite.length || problems.length ? 1 : 0);

async function query(page) {
  await run(page, QUERY);
  if (!(await waitForPane(page, plan.query.expected, TIMEOUT))) {
    const headline = `the query's result never showed ${JSON.stringify(plan.query.expected)}`;
    throw new Error(report(headline, await paneNow(page)));
  }
  await screenshot(page, plan.query.screenshot);
  console.log(`query: GraphiQL showed ${plan.query.expected.length} expected values`);
}

async function subscription(page, subscribed, sockets) {
  await run(page, SUBSCRIPTION);
  await within(subscribed, TIMEOUT, async () =>
    report('GraphiQL sent no subscribe message on a websocket', await paneNow(page), sockets),
  );
  const expected = plan.subscription.expected;
  const deadline = Date.now() + EVENT_TIMEOUT;
  let enrolments = 0;
  for (let patience = PATIENCE; ; patience *= 2) {
    if (enrolments > 0) await mutate('unenrollStudent');
    await mutate('enrollStudent');
    enrolments += 1;
    const left = deadline - Date.now();
    if (await waitForPane(page, expected, Math.max(Math.min(patience, left), 1_000))) break;
    if (Date.now() >= deadline) {
      const headline =
        `the subscription's event never showed ${JSON.stringify(expected)}` +
        ` (${enrolments} enrolment(s) from a second connection, ${EVENT_TIMEOUT / 1000} s)`;
      throw new Error(report(headline, await paneNow(page), sockets));
    }
    console.log(`subscription: no event within ${patience / 1000} s; enrolling again`);
  }
  await screenshot(page, plan.subscription.screenshot);
  console.log(
    `subscription: GraphiQL showed the event's ${expected.length} expected values` +
      ` after ${enrolments} enrolment(s)`,
  );
}

// Each role in turn: its button, then the query, on a result pane emptied first (so that
// what it shows is this role's answer, not the last one's).
async function roles(page) {
  for (const step of plan.roles.steps) {
    await page.click(`#roles button[data-role="${step.role}"]`, { timeout: TIMEOUT });
    // The headers editor (the editor tools' second) shows the header the role sends.
    await page.waitForFunction(
      (signedIn) => {
        const editors = document.querySelectorAll('.graphiql-editor-tool .CodeMirror');
        const text = editors[editors.length - 1]?.CodeMirror.getValue() ?? null;
        return text !== null && (signedIn ? text.includes('"Bearer ') : text === '');
      },
      step.role !== 'anonymous',
      { timeout: TIMEOUT },
    );
    await page.evaluate((selector) => document.querySelector(selector).CodeMirror.setValue(''), RESPONSE);
    await run(page, plan.roles.query);
    if (!(await waitForPane(page, ['"data"', ...step.shown], TIMEOUT))) {
      throw new Error(report(`as ${step.role}, the pane never showed ${step.shown}`, await paneNow(page)));
    }
    const shown = await paneNow(page);
    const leaked = step.hidden.filter((text) => shown.includes(text));
    if (leaked.length) throw new Error(report(`as ${step.role}, the pane showed ${leaked}`, shown));
    console.log(`roles: as ${step.role}, GraphiQL showed what the policy lets it read`);
  }
}

function messageType(payload) {
  try {
    return JSON.parse(String(payload)).type;
  } catch {
    return undefined;
  }
}

// GraphiQL 3's editors are CodeMirror 5: set the text as a paste would, then run it once
// GraphiQL has parsed it (it does so 100 ms after an edit, and picks HTTP or the websocket
// by the parsed operation: clicked sooner, a subscription would go out as the last query).
async function run(page, text) {
  await page.evaluate(
    ([selector, value]) => document.querySelector(selector).CodeMirror.setValue(value),
    [EDITOR, text],
  );
  await page.waitForFunction(
    ([selector, value]) =>
      document.querySelector(selector).CodeMirror.documentAST?.loc?.source.body === value,
    [EDITOR, text],
    { timeout: TIMEOUT },
  );
  await page.click('.graphiql-execute-button');
}

async function paneNow(page) {
  return page.evaluate(
    (selector) => document.querySelector(selector)?.CodeMirror.getValue(),
    RESPONSE,
  );
}

// Whether the result pane shows every text within `timeout` ms.
async function waitForPane(page, texts, timeout) {
  return page
    .waitForFunction(
      ([selector, wanted]) => {
        const text = document.querySelector(selector)?.CodeMirror.getValue() ?? '';
        return wanted.every((t) => text.includes(t));
      },
      [RESPONSE, texts],
      { timeout },
    )
    .then(
      () => true,
      (error) => {
        if (error.name === 'TimeoutError') return false;
        throw error;
      },
    );
}

// Waits for `promise` up to `timeout` ms; past that, fails with what `explain` says.
async function within(promise, timeout, explain) {
  const EXPIRED = Symbol('expired');
  let timer;
  const expired = new Promise((resolve) => (timer = setTimeout(() => resolve(EXPIRED), timeout)));
  const first = await Promise.race([promise, expired]);
  clearTimeout(timer);
  if (first === EXPIRED) throw new Error(await explain());
}

// A failure's report: what went wrong, what the result pane shows and, when a subscription
// was run, the page's websockets with the frames they received.
function report(headline, shown, sockets = undefined) {
  const lines = [headline, `the result pane shows:\n${shown}`];
  if (sockets?.length === 0) lines.push('the page opened no websocket');
  for (const socket of sockets ?? []) {
    lines.push(`websocket ${socket.url}${socket.closed ? ' (closed)' : ''} received:`);
    lines.push(...socket.received.map((frame) => `  ${frame}`));
  }
  return lines.join('\n');
}

// The enrolment (or, to try again, the unenrolment) as another client makes it: a plain
// POST from this process, on a connection of its own.
async function mutate(field) {
  const document = `mutation {
    ${field}(studentId: ${JSON.stringify(studentId)}, classId: ${JSON.stringify(classId)}) {
      userErrors { code message }
    }
  }`;
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: document }),
    signal: AbortSignal.timeout(TIMEOUT),
  });
  const body = await response.text();
  const result = JSON.parse(body);
  if (!response.ok || result.errors || result.data[field].userErrors.length) {
    throw new Error(`${field} from a second connection failed: ${response.status} ${body}`);
  }
}

async function screenshot(page, path) {
  mkdirSync(dirname(path), { recursive: true });
  await page.screenshot({ path });
}
