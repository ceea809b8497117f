// GraphQL Code Generator's typescript and typescript-operations plugins over .graphql
// documents, through @graphql-codegen/core: the function its CLI calls once it has loaded
// the files, with the same validation of the documents against the schema (an anonymous
// operation beside others, an unknown field, a duplicate name fail). The CLI itself is
// left out: it brings some 250 packages (URL, git and GitHub loaders, prompts) to npm ci.
//
// Usage: node codegen.js SCHEMA OUTPUT DOCUMENT...; writes OUTPUT, exits 1 on a failure.
'use strict';

const fs = require('node:fs');
const { codegen } = require('@graphql-codegen/core');
const typescript = require('@graphql-codegen/typescript');
const typescriptOperations = require('@graphql-codegen/typescript-operations');
const { buildSchema, parse } = require('graphql');

const [schemaFile, output, ...documentFiles] = process.argv.slice(2);
if (!documentFiles.length) {
  console.error('usage: node codegen.js SCHEMA OUTPUT DOCUMENT...');
  process.exit(2);
}

async function main() {
  const schemaText = fs.readFileSync(schemaFile, 'utf8');
  const typed = await codegen({
    filename: output,
    schema: parse(schemaText),
    schemaAst: buildSchema(schemaText),
    documents: documentFiles.map((location) => ({
      location,
      document: parse(fs.readFileSync(location, 'utf8')),
    })),
    config: {},
    plugins: [{ typescript: {} }, { 'typescript-operations': {} }],
    pluginMap: { typescript, 'typescript-operations': typescriptOperations },
  });
  fs.writeFileSync(output, typed);
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
