// Apollo Client's persisted-queries link (@apollo/client/link/persisted-queries), with
// SHA-256 from Node's crypto, against the running API (tests/project/test_clients.py serves it).
//
// Usage: node persisted.mjs URL            the API runs any document: APQ's miss, then
//                                          register, then by hash alone (POST, then GET)
//        node persisted.mjs URL MANIFEST   the API runs trusted documents only: a manifest
//                                          operation runs by its id; another is refused
// Prints one line a check; exits 1 when any fails.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { print } from 'graphql';

const [url, manifestPath] = process.argv.slice(2);
if (!url) {
  console.error('usage: node persisted.mjs URL [MANIFEST]');
  process.exit(2);
}
const sha256 = (text) => createHash('sha256').update(text).digest('hex');

// What the link sent: each request's method and whether it carried the text or a hash.
const sent = [];
async function recordingFetch(input, init = {}) {
  const method = init.method || 'GET';
  const target = new URL(input);
  const body = init.body ? JSON.parse(init.body) : Object.fromEntries(target.searchParams);
  const extensions = typeof body.extensions === 'string' ? JSON.parse(body.extensions) : body.extensions;
  sent.push({ method, text: Boolean(body.query), hash: extensions?.persistedQuery?.sha256Hash });
  return fetch(input, init);
}

function client(persisted, options = {}) {
  return new ApolloClient({
    link: new PersistedQueryLink(persisted).concat(new HttpLink({ uri: url, fetch: recordingFetch, ...options })),
    cache: new InMemoryCache(),
  });
}

let failures = 0;
async function check(what, run) {
  sent.length = 0;
  try {
    const detail = await run();
    console.log(`ok   apollo persisted: ${what}${detail ? ` (${detail})` : ''}`);
  } catch (error) {
    failures += 1;
    console.log(`FAIL apollo persisted: ${what}: ${error?.stack || error}`);
  }
}

function expectSent(expected) {
  const got = sent.map(({ method, text, hash }) => `${method} ${text ? 'text' : 'no text'}${hash ? ' +hash' : ''}`);
  if (JSON.stringify(got) !== JSON.stringify(expected)) {
    throw new Error(`sent ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
  }
  return got.join(', ');
}

if (!manifestPath) {
  // A query no one registered yet: this run's own (its alias is unique).
  const alias = `t${Date.now()}`;
  const QUERY = gql(`query Teachers { ${alias}: teachers(first: 2) { edges { node { id name } } } }`);
  await check('a miss, then the text registered, then the hash alone', async () => {
    const apollo = client({ sha256 });
    const first = await apollo.query({ query: QUERY, fetchPolicy: 'network-only' });
    if (!first.data?.[alias]?.edges?.length) throw new Error(`no data: ${JSON.stringify(first)}`);
    const again = await apollo.query({ query: QUERY, fetchPolicy: 'network-only' });
    if (!again.data?.[alias]?.edges?.length) throw new Error(`no data: ${JSON.stringify(again)}`);
    return expectSent(['POST no text +hash', 'POST text +hash', 'POST no text +hash']);
  });
  await check('the hash alone over GET (useGETForHashedQueries)', async () => {
    const apollo = client({ sha256, useGETForHashedQueries: true });
    const result = await apollo.query({ query: QUERY, fetchPolicy: 'network-only' });
    if (!result.data?.[alias]?.edges?.length) throw new Error(`no data: ${JSON.stringify(result)}`);
    return expectSent(['GET no text +hash']);
  });
} else {
  // The app's operations as the manifest holds them; the link sends each one's id.
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const ids = Object.fromEntries(manifest.operations.map((op) => [op.name, op.id]));
  const generateHash = (document) => {
    const name = document.definitions.find((d) => d.kind === 'OperationDefinition')?.name?.value;
    return ids[name] ?? sha256(print(document)); // not shipped: the link's own hash
  };
  const page = manifest.operations.find((op) => op.name === 'StudentPageQuery');
  await check('a manifest operation runs by its id', async () => {
    const apollo = client({ generateHash });
    // Apollo's defaults (cache-first): the manifest's body carries the `__typename`s Apollo
    // adds (`persist --add-typename`), so the answer is normalized into the cache.
    const { data } = await apollo.query({ query: gql(page.body), variables: { id: 'stu-0001' } });
    if (data?.student?.id !== 'stu-0001') throw new Error(`unexpected data ${JSON.stringify(data)}`);
    if (!apollo.cache.extract()['Student:stu-0001']) {
      throw new Error(`not normalized: ${Object.keys(apollo.cache.extract())}`);
    }
    return expectSent(['POST no text +hash']);
  });
  await check('an operation not in the manifest is refused', async () => {
    const apollo = client({ generateHash });
    try {
      await apollo.query({ query: gql('query NotShipped { teachers(first: 1) { edges { node { id } } } }') });
    } catch (error) {
      const codes = (error.errors || []).map((e) => e.extensions?.code);
      if (!codes.includes('FORBIDDEN_DOCUMENT')) throw error;
      return expectSent(['POST no text +hash', 'POST text +hash']);
    }
    throw new Error('it ran');
  });
}

console.log(failures ? `${failures} check(s) failed` : 'every persisted check passed');
process.exit(failures ? 1 : 0);
