// Relay's runtime (relay-runtime, no React) against the running API, over the documents of
// runtime/documents.js compiled by relay-compiler (tests/project/test_client_conventions.py): a roster's
// first page, its second page loaded as usePaginationFragment's loadNext does (the
// fragment's @refetchable query, `node(id:)` with the fragment's global id), a student
// refetched through `node(id:)`, and a student and a teacher that share an id.
//
// Usage: node runtime.js URL ARTIFACTS CLASS_ID TWIN_ID MODE, URL the API's /graphql,
// ARTIFACTS the compiler's output, MODE `nodeId` (the README's getDataID) or `default`
// (Relay's own, which keys records by `id`). Prints what the store holds, as JSON.
'use strict';

const path = require('node:path');
const {
  Environment,
  Network,
  RecordSource,
  Store,
  createOperationDescriptor,
  fetchQuery,
  getPaginationMetadata,
  getPaginationVariables,
  getRefetchMetadata,
  getRequest,
  getSelector,
} = require('relay-runtime');

const [url, artifacts, classId, twinId, mode] = process.argv.slice(2);
if (!mode) {
  console.error('usage: node runtime.js URL ARTIFACTS CLASS_ID TWIN_ID nodeId|default');
  process.exit(2);
}
const artifact = (name) => require(path.resolve(artifacts, `${name}.graphql.js`));
const PAGE = 2;

const network = Network.create(async (params, variables) => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: params.text, variables }),
  });
  const body = await response.json();
  if (body.errors) throw new Error(`${params.name}: ${JSON.stringify(body.errors)}`);
  return body;
});
const environment = new Environment({
  network,
  store: new Store(new RecordSource()),
  // The README's getDataID: records keyed by the global id, as the schema's Node has it.
  ...(mode === 'nodeId' ? { getDataID: (o) => o.nodeId } : {}),
});

// Fetches and retains an operation (a component would, while mounted), and answers its
// root data (fragment references where it spreads fragments).
async function query(node, variables) {
  const operation = createOperationDescriptor(getRequest(node), variables);
  environment.retain(operation);
  await fetchQuery(environment, node, variables).toPromise();
  return environment.lookup(operation.fragment).data;
}

function read(fragment, reference) {
  const selector = getSelector(fragment, reference);
  return { dataID: selector.dataID, data: environment.lookup(selector).data };
}

async function main() {
  const roster = artifact('RuntimeRoster_class');
  const first = await query(artifact('RuntimeRosterQuery'), { classId, count: PAGE });
  const before = read(roster, first.class);
  const firstPage = before.data.students.edges.map((edge) => edge.node.id);

  // loadNext: the refetchable query with the pagination variables and the fragment's id.
  const { refetchableRequest, identifierInfo } = getRefetchMetadata(roster, 'runtime.js');
  const { paginationMetadata } = getPaginationMetadata(roster, 'runtime.js');
  const variables = getPaginationVariables(
    'forward',
    PAGE,
    before.data.students.pageInfo.endCursor,
    getSelector(roster, first.class).variables,
    { [identifierInfo.identifierQueryVariableName]: before.data[identifierInfo.identifierField] },
    paginationMetadata,
  );
  const next = await query(refetchableRequest, variables);
  const pageRecord = read(roster, next.node).dataID;
  const after = read(roster, first.class);

  const student = after.data.students.edges[0].node;
  const refetched = await query(artifact('RuntimeNodeQuery'), { id: student.nodeId });

  const twins = await query(artifact('RuntimeTwinsQuery'), { id: twinId });
  console.log(
    JSON.stringify({
      rosterRecord: before.dataID,
      pageRecord,
      firstPage,
      roster: after.data.students.edges.map((edge) => edge.node.id),
      variables,
      edgeRecord: student.__id,
      nodeRecord: refetched.node.__id,
      twins: {
        student: twins.student.name,
        teacher: twins.teacher.name,
        records: [twins.student.__id, twins.teacher.__id],
      },
    }),
  );
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
