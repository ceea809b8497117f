// The field's GraphQL clients, each at its default settings, against the running API
// (tests/project/test_clients.py serves it): urql (@urql/core), Apollo Client, graphql-ws and
// graphql-sse each run a query, a mutation and a subscription, whose event comes from a
// mutation made on another connection (a plain fetch from this process).
//
// Usage: node clients.mjs URL, URL the API's /graphql (http://127.0.0.1:PORT/graphql).
// Prints one line a check; exits 1 when any fails.
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { Client as UrqlClient, cacheExchange, fetchExchange } from '@urql/core';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url] = process.argv.slice(2);
if (!url) {
  console.error('usage: node clients.mjs URL');
  process.exit(2);
}
const wsUrl = url.replace(/^http/, 'ws');
// Waits are on conditions; these only bound them, generously, for a busy machine.
const STEP_TIMEOUT = 60_000;
const EVENT_TIMEOUT = 120_000;
// graphql-transport-ws and SSE do not say when a subscription is held: writes are made
// until its event arrives, the first after PATIENCE, then doubling.
const PATIENCE = 1_000;

const QUERY = `query Student($id: ID!) {
  student(id: $id) { id name classes { edges { node { subject } } } }
}`;
const RENAME = `mutation Rename($id: ID!, $name: String!) {
  updateStudent(id: $id, input: { name: $name }) { student { id name } userErrors { code message } }
}`;
const CHANGED = `subscription Changed($id: ID!) {
  studentChanged(id: $id) { kind student { id name } }
}`;

function bounded(promise, what, ms = STEP_TIMEOUT) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function checkStudent(data, id, what) {
  if (data?.student?.id !== id || !data.student.name) {
    throw new Error(`${what}: unexpected data ${JSON.stringify(data)}`);
  }
}

function checkRenamed(data, name, what) {
  const payload = data?.updateStudent;
  if (payload?.userErrors?.length || payload?.student?.name !== name) {
    throw new Error(`${what}: unexpected data ${JSON.stringify(data)}`);
  }
}

// A write on another connection: what a subscriber hears about.
async function renameElsewhere(id, name) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: RENAME, variables: { id, name } }),
  });
  checkRenamed((await response.json()).data, name, 'the other connection\'s rename');
}

// Subscribes with `subscribe(onData, onError)` (which returns a function that ends it),
// renames the student from elsewhere until an event shows one of the names written.
async function hearRename(client, id, subscribe) {
  const written = new Set();
  let resolve;
  let reject;
  const heard = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const stop = subscribe((data) => {
    const name = data?.studentChanged?.student?.name;
    if (data?.studentChanged?.kind === 'UPDATED' && written.has(name)) resolve(name);
  }, reject);
  const deadline = Date.now() + EVENT_TIMEOUT;
  let patience = PATIENCE;
  try {
    for (let attempt = 1; ; attempt += 1) {
      const name = `${client} ${attempt}`;
      written.add(name);
      const waited = new Promise((res) => setTimeout(res, patience));
      await bounded(renameElsewhere(id, name), `${client}: the rename`);
      const got = await Promise.race([heard, waited.then(() => null)]);
      if (got) return got;
      if (Date.now() > deadline) throw new Error(`${client}: no event in ${EVENT_TIMEOUT} ms`);
      patience *= 2;
    }
  } finally {
    stop();
  }
}

// A client's three checks; each failure is reported, none stops the others.
let failures = 0;
async function check(client, what, run) {
  try {
    const detail = await bounded(run(), `${client} ${what}`, EVENT_TIMEOUT + STEP_TIMEOUT);
    console.log(`ok   ${client}: ${what}${detail ? ` (${detail})` : ''}`);
  } catch (error) {
    failures += 1;
    console.log(`FAIL ${client}: ${what}: ${error?.stack || error}`);
  }
}

// -- urql: its documented exchanges; subscriptions over fetch (SSE) -------------------------
{
  const client = new UrqlClient({ url, exchanges: [cacheExchange, fetchExchange], fetchSubscriptions: true });
  const id = 'stu-0011';
  await check('urql', 'query', async () => {
    const result = await client.query(QUERY, { id }).toPromise();
    if (result.error) throw result.error;
    checkStudent(result.data, id, 'query');
  });
  await check('urql', 'mutation', async () => {
    const result = await client.mutation(RENAME, { id, name: 'urql mutation' }).toPromise();
    if (result.error) throw result.error;
    checkRenamed(result.data, 'urql mutation', 'mutation');
  });
  await check('urql', 'subscription', () =>
    hearRename('urql', id, (onData, onError) => {
      const { unsubscribe } = client.subscription(CHANGED, { id }).subscribe((result) => {
        if (result.error) onError(result.error);
        else onData(result.data);
      });
      return unsubscribe;
    }),
  );
}

// -- Apollo Client: HttpLink for queries and mutations, GraphQLWsLink for subscriptions ----
{
  const client = new ApolloClient({ link: new HttpLink({ uri: url }), cache: new InMemoryCache() });
  const ws = createWsClient({ url: wsUrl, webSocketImpl: WebSocket });
  const live = new ApolloClient({ link: new GraphQLWsLink(ws), cache: new InMemoryCache() });
  const id = 'stu-0012';
  await check('apollo', 'query', async () => {
    const { data } = await client.query({ query: gql(QUERY), variables: { id } });
    checkStudent(data, id, 'query');
  });
  await check('apollo', 'mutation', async () => {
    const { data } = await client.mutate({ mutation: gql(RENAME), variables: { id, name: 'apollo mutation' } });
    checkRenamed(data, 'apollo mutation', 'mutation');
  });
  await check('apollo', 'subscription', () =>
    hearRename('apollo', id, (onData, onError) => {
      const subscription = live
        .subscribe({ query: gql(CHANGED), variables: { id } })
        .subscribe({ next: (result) => (result.error ? onError(result.error) : onData(result.data)), error: onError });
      return () => subscription.unsubscribe();
    }),
  );
  await ws.dispose();
}

// -- graphql-ws: every operation over one websocket ----------------------------------------
function once(client, payload) {
  return new Promise((resolve, reject) => {
    let result;
    client.subscribe(payload, {
      next: (value) => (result = value),
      error: reject,
      complete: () => (result?.errors ? reject(new Error(JSON.stringify(result.errors))) : resolve(result.data)),
    });
  });
}
{
  const client = createWsClient({ url: wsUrl, webSocketImpl: WebSocket });
  const id = 'stu-0013';
  await check('graphql-ws', 'query', async () => {
    checkStudent(await once(client, { query: QUERY, variables: { id } }), id, 'query');
  });
  await check('graphql-ws', 'mutation', async () => {
    const data = await once(client, { query: RENAME, variables: { id, name: 'ws mutation' } });
    checkRenamed(data, 'ws mutation', 'mutation');
  });
  await check('graphql-ws', 'subscription', () =>
    hearRename('graphql-ws', id, (onData, onError) =>
      client.subscribe(
        { query: CHANGED, variables: { id } },
        { next: (result) => (result.errors ? onError(new Error(JSON.stringify(result.errors))) : onData(result.data)), error: onError, complete: () => {} },
      ),
    ),
  );
  await client.dispose();
}

// -- graphql-sse: distinct connections mode (its default), every operation a stream --------
{
  const client = createSseClient({ url });
  const id = 'stu-0014';
  await check('graphql-sse', 'query', async () => {
    checkStudent(await once(client, { query: QUERY, variables: { id } }), id, 'query');
  });
  await check('graphql-sse', 'mutation', async () => {
    const data = await once(client, { query: RENAME, variables: { id, name: 'sse mutation' } });
    checkRenamed(data, 'sse mutation', 'mutation');
  });
  await check('graphql-sse', 'subscription', () =>
    hearRename('graphql-sse', id, (onData, onError) =>
      client.subscribe(
        { query: CHANGED, variables: { id } },
        { next: (result) => (result.errors ? onError(new Error(JSON.stringify(result.errors))) : onData(result.data)), error: onError, complete: () => {} },
      ),
    ),
  );
  client.dispose();
}

console.log(failures ? `${failures} check(s) failed` : 'every client passed');
process.exit(failures ? 1 : 0);
