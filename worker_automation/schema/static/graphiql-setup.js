// GraphiQL for /graphql, working without internet: every asset is served by the service itself.
// Queries and mutations go over HTTP with the headers of the header editor; subscriptions open a
// graphql-transport-ws websocket whose connection_init payload carries those same headers, which
// is how the API authenticates websockets (browsers cannot set headers on them). The schema is
// fetched again whenever the key in the header editor changes: the first fetch, made before any
// key was typed, gets a 401, and the docs and completion would otherwise stay empty.
(function () {
  "use strict";

  var endpoint = window.location.origin + "/graphql";
  var subscriptionEndpoint = endpoint.replace(/^http/, "ws");

  // A new fetcher is what makes GraphiQL introspect again (with the headers of the editor).
  function newFetcher() {
    return GraphiQL.createFetcher({
      url: endpoint,
      subscriptionUrl: subscriptionEndpoint,
      enableIncrementalDelivery: false,
    });
  }

  // The key of the header editor's text; null while the text is not JSON (being typed).
  function keyOf(text) {
    try {
      var headers = JSON.parse(text || "{}");
      return (headers && (headers["X-API-Key"] || headers["x-api-key"])) || "";
    } catch (error) {
      return null;
    }
  }

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
  var root = ReactDOM.createRoot(container);
  var fetcher = newFetcher();
  // The key the first introspection goes out with: the persisted headers' (GraphiQL's storage).
  var lastKey = keyOf(readStored("graphiql:headers")) || "";
  var pending = null;

  function readStored(name) {
    try {
      return window.localStorage.getItem(name);
    } catch (error) {
      return null;
    }
  }

  function onEditHeaders(text) {
    var key = keyOf(text);
    if (key === null || key === lastKey) {
      return;
    }
    clearTimeout(pending);
    // Once the typing pauses: one introspection per key, not one per keystroke.
    pending = setTimeout(function () {
      lastKey = key;
      if (key) {
        fetcher = newFetcher();
        render();
      }
    }, 500);
  }

  function render() {
    root.render(
      React.createElement(GraphiQL, {
        fetcher: fetcher,
        defaultQuery: defaultQuery,
        defaultHeaders: JSON.stringify({ "X-API-Key": "" }, null, 2),
        defaultEditorToolsVisibility: "headers",
        shouldPersistHeaders: true,
        isHeadersEditorEnabled: true,
        onEditHeaders: onEditHeaders,
      })
    );
  }

  render();
})();
