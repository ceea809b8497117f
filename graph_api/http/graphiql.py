"""GraphiQL served from the API itself, so it works with no internet access.

Strawberry's own page loads React and GraphiQL from a CDN and is blank offline. Ours loads
the same bundles from `static/graphiql/`, which `python -m tools.graphiql_assets` (run by
`make`) copies there from the npm packages pinned in `web/graphiql/`. The page names no
other host. An installation without those files gets a page that says so, not a blank one.

On the embedded backend with no sign-in configured (`make run`), the page also offers a role
picker: one click sets GraphiQL's `Authorization` header to a dev token (`tokens.DEV_SIGNER`,
what `graph-api token` signs with) of admin, a teacher, a student or a guardian of the demo
school, or clears it (anonymous), so the policy can be tried without a terminal. The tokens
are made when the page is served; no other server's page carries any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from graph_api.graph.auth.policy import Role
from graph_api.graph.auth.tokens import DEV_SIGNER, hs256_signer, role_claims, sign
from graph_api.settings import Settings

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

# The picker's roles, as ids of the generated demo school (`ops.demo`): the label, the
# role (None: no token), the node the caller is, the students a guardian answers for.
DEMO_ROLES: tuple[tuple[str, Role | None, str | None, tuple[str, ...]], ...] = (
    ("anonymous", None, None, ()),
    ("admin", Role.ADMIN, None, ()),
    ("teacher tch-001", Role.TEACHER, "tch-001", ()),
    ("student stu-0001", Role.STUDENT, "stu-0001", ()),
    ("guardian of stu-0001, stu-0002", Role.GUARDIAN, None, ("stu-0001", "stu-0002")),
)
# A picked role's token lasts this long; reloading the page makes fresh ones.
ROLE_TOKEN_SECONDS = 12 * 3600


def demo_roles(settings: Settings) -> list[dict[str, str]] | None:
    """The picker's entries (`label`, `role`, and `headers`: GraphiQL's headers editor text)
    on a server that takes dev tokens; None on any other (its page has no picker)."""
    if hs256_signer(settings) is not DEV_SIGNER:
        return None
    entries = []
    for label, role, node_id, students in DEMO_ROLES:
        headers = ""
        if role is not None:
            body = role_claims(settings, role, node_id, students, ROLE_TOKEN_SECONDS)
            headers = json.dumps({"Authorization": f"Bearer {sign(DEV_SIGNER, body)}"}, indent=2)
        entries.append({"label": label, "role": role or "anonymous", "headers": headers})
    return entries


_PAGE = """\
<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>graph-api · GraphiQL</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="{assets}/graphiql.min.css">
  <style>
    body {{ margin: 0; }} #graphiql {{ height: 100vh; display: flex; flex-direction: column; }}
    #graphiql-ide {{ flex: 1; min-height: 0; }}
    #roles {{ font: 14px sans-serif; padding: 6px 12px; display: flex; gap: 6px;
      align-items: center; border-bottom: 1px solid #ddd; }}
    #roles button {{ font: inherit; padding: 2px 10px; border: 1px solid #bbb;
      border-radius: 4px; background: #fff; cursor: pointer; }}
    #roles button[aria-pressed="true"] {{ background: #e10098; border-color: #e10098;
      color: #fff; }}
  </style>
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
      // The embedded demo's roles (null elsewhere): each sets the headers editor, which
      // GraphiQL sends with every request and in a websocket's connection_init.
      const roles = {roles};
      const h = React.createElement;
      function Page() {{
        const [picked, pick] = React.useState(0);
        const ide = h(GraphiQL, {{
          fetcher,
          defaultQuery: {default_query},
          // With roles, the headers tab is open: a pick shows the header it sets.
          defaultEditorToolsVisibility: roles ? "headers" : true,
          ...(roles ? {{ headers: roles[picked].headers, shouldPersistHeaders: false }} : {{}}),
        }});
        if (!roles) return h("div", {{ id: "graphiql-ide" }}, ide);
        const buttons = roles.map((role, index) => h("button", {{
          key: role.role,
          type: "button",
          "data-role": role.role,
          "aria-pressed": String(index === picked),
          onClick: () => pick(index),
        }}, role.label));
        return h(React.Fragment, null,
          h("div", {{ id: "roles", role: "group", "aria-label": "Act as" }}, "Act as:", ...buttons),
          h("div", {{ id: "graphiql-ide" }}, ide));
      }}
      ReactDOM.createRoot(root).render(h(Page));
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


def _js_value(value: object) -> str:
    # A JS literal (JSON) that cannot close the <script> element it sits in.
    return json.dumps(value).replace("</", "<\\/")


def page(directory: Path = ASSETS_DIR, roles: Sequence[dict[str, str]] | None = None) -> str:
    """GraphiQL's HTML when its assets are installed (with the role picker of `roles`,
    `demo_roles`' entries); otherwise a page that says so."""
    if not assets_present(directory):
        return _MISSING.format(dir="graph_api/http/static/graphiql/")
    return _PAGE.format(
        assets=ASSETS_URL,
        default_query=_js_value(DEFAULT_QUERY),
        roles=_js_value(list(roles)) if roles else "null",
    )
