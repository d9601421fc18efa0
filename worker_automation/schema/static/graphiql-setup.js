// GraphiQL for /graphql, working without internet: every asset is served by the service itself.
// Queries and mutations go over HTTP with the headers of the header editor; subscriptions open a
// graphql-transport-ws websocket whose connection_init payload carries those same headers, which
// is how the API authenticates websockets (browsers cannot set headers on them).
(function () {
  "use strict";

  var endpoint = window.location.origin + "/graphql";
  var subscriptionEndpoint = endpoint.replace(/^http/, "ws");

  var fetcher = GraphiQL.createFetcher({
    url: endpoint,
    subscriptionUrl: subscriptionEndpoint,
    enableIncrementalDelivery: false,
  });

  var defaultQuery = [
    "# Informe a chave em Headers (X-API-Key); execute com Ctrl-Enter.",
    "query Painel {",
    "  stats { total byStatus byQueue }",
    "  queueLiveStatus { queues { queueName activeCount pendingCount loadPercent } }",
    "}",
    "",
  ].join("\n");

  var container = document.getElementById("graphiql");
  container.className = "";
  container.textContent = "";
  ReactDOM.createRoot(container).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: defaultQuery,
      defaultHeaders: JSON.stringify({ "X-API-Key": "" }, null, 2),
      defaultEditorToolsVisibility: "headers",
      shouldPersistHeaders: true,
      isHeadersEditorEnabled: true,
    })
  );
})();
