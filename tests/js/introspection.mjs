// What GraphiQL, graphql-codegen and Apollo's tooling do first: the standard introspection query
// of graphql-js, with every option on, turned back into a schema.
import { buildClientSchema, getIntrospectionQuery, printSchema } from "graphql";

import { expect } from "./report.mjs";

const OPTIONS = {
  descriptions: true,
  specifiedByUrl: true,
  directiveIsRepeatable: true,
  schemaDescription: true,
  inputValueDeprecation: true,
};

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
  return `${printed.length} characters of SDL`;
}
