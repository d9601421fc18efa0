"""Transport-free operations: GraphQL, REST and the CLI all call these, none is written twice."""
