"""GraphiQL served from the API itself, so it works with no internet access.

Strawberry's own page loads React and GraphiQL from a CDN and is blank offline. Ours loads
the same bundles from `static/graphiql/`, which `python -m tools.graphiql_assets` (run by
`make`) copies there from the npm packages pinned in `web/graphiql/`. The page names no
other host. An installation without those files gets a page that says so, not a blank one.
"""

from __future__ import annotations

import json
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent / "static" / "graphiql"
# Where the page and the mount find them; relative, so a path prefix (an API stage) works.
ASSETS_URL = "static/graphiql"
# File served -> its source under web/graphiql/node_modules (UMD builds: no bundler needed).
ASSETS = {
    "graphiql.min.css": "graphiql/graphiql.min.css",
    "react.production.min.js": "react/umd/react.production.min.js",
    "react-dom.production.min.js": "react-dom/umd/react-dom.production.min.js",
    "graphiql.min.js": "graphiql/graphiql.min.js",
}

DEFAULT_QUERY = """\
# GraphiQL, served by graph-api (no CDN). Run with Ctrl-Enter or the play button.
{
  student(id: "stu-0001") {
    name
    home { country city }
    classes(first: 5) {
      edges { node { subject teacher { name } } }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""

_PAGE = """\
<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>graph-api · GraphiQL</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="{assets}/graphiql.min.css">
  <style>body {{ margin: 0; }} #graphiql {{ height: 100vh; }}</style>
</head>
<body>
  <div id="graphiql">Loading GraphiQL…</div>
  <noscript>GraphiQL needs JavaScript.</noscript>
  <script src="{assets}/react.production.min.js"></script>
  <script src="{assets}/react-dom.production.min.js"></script>
  <script src="{assets}/graphiql.min.js"></script>
  <script>
    const root = document.getElementById("graphiql");
    if (typeof GraphiQL === "undefined" || typeof ReactDOM === "undefined") {{
      // Say what broke rather than leave the page blank.
      root.textContent = "GraphiQL could not load its scripts from {assets}/ on this server.";
    }} else {{
      // Subscriptions run over graphql-transport-ws on the same path.
      const ws = (window.location.protocol === "https:" ? "wss://" : "ws://")
        + window.location.host + window.location.pathname;
      const fetcher = GraphiQL.createFetcher({{
        url: window.location.pathname,
        subscriptionUrl: ws,
        enableIncrementalDelivery: false,
      }});
      ReactDOM.createRoot(root).render(
        React.createElement(GraphiQL, {{
          fetcher,
          defaultQuery: {default_query},
          defaultEditorToolsVisibility: true,
        }}),
      );
    }}
  </script>
</body>
</html>
"""

_MISSING = """\
<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>graph-api · GraphiQL is not installed</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
  <h1>GraphiQL is not installed on this server</h1>
  <p>Its files ({dir}) are built from npm when the project is installed with
  <code>make</code> (or <code>python -m tools.graphiql_assets</code>, which needs npm),
  and this installation has none of them.</p>
  <p>The API works without them: POST GraphQL requests to this URL.</p>
</body>
</html>
"""


def assets_present(directory: Path = ASSETS_DIR) -> bool:
    return all((directory / name).is_file() for name in ASSETS)


def _js_string(text: str) -> str:
    # A JS string literal that cannot close the <script> element it sits in.
    return json.dumps(text).replace("</", "<\\/")


def page(directory: Path = ASSETS_DIR) -> str:
    """GraphiQL's HTML when its assets are installed; otherwise a page that says so."""
    if not assets_present(directory):
        return _MISSING.format(dir="graph_api/http/static/graphiql/")
    return _PAGE.format(assets=ASSETS_URL, default_query=_js_string(DEFAULT_QUERY))
