// GraphiQL end to end, in Debian's headless Chromium (playwright-core drives it; no
// browser download). Opens the page, runs a query with a nested connection, waits for the
// expected values in the result pane and saves a screenshot.
//
// Usage: node graphiql.mjs URL SCREENSHOT.png EXPECTED_TEXT...
// CHROMIUM overrides the browser (default /usr/bin/chromium). Exits 1 on any failure, on a
// request to another origin (the page must need no CDN), and on a page or console error.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, screenshot, ...expected] = process.argv.slice(2);
if (!url || !screenshot || expected.length === 0) {
  console.error('usage: node graphiql.mjs URL SCREENSHOT.png EXPECTED_TEXT...');
  process.exit(2);
}
const QUERY = `{
  student(id: "stu-0001") {
    name
    classes {
      edges { node { subject teacher { name } } }
    }
  }
}`;
const TIMEOUT = 30_000;
const origin = new URL(url).origin;
const offsite = [];
const problems = [];
const profile = mkdtempSync(join(tmpdir(), 'graphiql-e2e-')); // a fresh --user-data-dir

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
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

  await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT });
  const editor = '.graphiql-query-editor .CodeMirror';
  await page.waitForSelector(editor, { timeout: TIMEOUT });
  // GraphiQL 3's editors are CodeMirror 5: set the text as a paste would, then run it.
  await page.evaluate(
    ([selector, query]) => document.querySelector(selector).CodeMirror.setValue(query),
    [editor, QUERY],
  );
  await page.click('.graphiql-execute-button');
  const response = '.graphiql-response .CodeMirror';
  await page.waitForFunction(
    ([selector, texts]) => {
      const text = document.querySelector(selector)?.CodeMirror.getValue() ?? '';
      return texts.every((t) => text.includes(t));
    },
    [response, expected],
    { timeout: TIMEOUT },
  ).catch(async (error) => {
    const shown = await page.evaluate(
      (selector) => document.querySelector(selector)?.CodeMirror.getValue(),
      response,
    );
    throw new Error(`result pane never showed ${JSON.stringify(expected)}; it shows:\n${shown}`, {
      cause: error,
    });
  });
  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot });
  console.log(`GraphiQL showed ${expected.length} expected values; screenshot ${screenshot}`);
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
