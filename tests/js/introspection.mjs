// What GraphiQL, graphql-codegen and Apollo's tooling do first: the standard introspection query
// of graphql-js, with every option on, turned back into a schema. That schema must be the one the
// repository exports to schema.graphql, so the tools see every type and field the API has.
import { readFileSync } from "node:fs";

import { buildClientSchema, buildSchema, getIntrospectionQuery, lexicographicSortSchema, printSchema } from "graphql";

import { expect } from "./report.mjs";

const OPTIONS = {
  descriptions: true,
  specifiedByUrl: true,
  directiveIsRepeatable: true,
  schemaDescription: true,
  inputValueDeprecation: true,
};

const EXPORTED = new URL("../../schema.graphql", import.meta.url);

function sortedSdl(schema) {
  return printSchema(lexicographicSortSchema(schema));
}

export async function checkClientSchema(apiUrl, apiKey) {
  const response = await fetch(`${apiUrl}/graphql`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-API-Key": apiKey },
    body: JSON.stringify({ query: getIntrospectionQuery(OPTIONS), operationName: "IntrospectionQuery" }),
  });
  const text = await response.text();
  expect(response.ok, `HTTP ${response.status}: ${text.slice(0, 1000)}`);
  const body = JSON.parse(text);
  expect(!body.errors, `errors: ${String(JSON.stringify(body.errors)).slice(0, 1000)}`);
  const printed = printSchema(buildClientSchema(body.data));
  for (const wanted of ["type Query", "type Mutation", "type Subscription", "dispatchAutomation("]) {
    expect(printed.includes(wanted), `the printed schema has no "${wanted}"`);
  }
  const served = sortedSdl(buildClientSchema(body.data)).split("\n");
  const exported = sortedSdl(buildSchema(readFileSync(EXPORTED, "utf8"))).split("\n");
  const lines = Math.max(served.length, exported.length);
  const differs = Array.from({ length: lines }, (_, index) => index).find((index) => served[index] !== exported[index]);
  expect(
    differs === undefined,
    `the served schema differs from schema.graphql at sorted line ${differs + 1}: ` +
      `${JSON.stringify(served[differs])} against ${JSON.stringify(exported[differs])}`,
  );
  return `${printed.length} characters of SDL, the same schema as schema.graphql`;
}
