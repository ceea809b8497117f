"""Copy GraphiQL's browser bundles (npm, pinned in web/graphiql/) into
graph_api/http/static/graphiql/, where the API serves them: GraphiQL then needs no CDN.

Run by `make`'s install step. Without npm it warns and leaves GraphiQL uninstalled (the
page then says so), except on CI, where that is an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from graph_api.http import graphiql
from tools.node import ROOT, npm_ci

PACKAGE = ROOT / "web" / "graphiql"


def build() -> None:
    modules = npm_ci(PACKAGE)
    graphiql.ASSETS_DIR.mkdir(parents=True, exist_ok=True)
    for name, source in graphiql.ASSETS.items():
        shutil.copyfile(modules / source, graphiql.ASSETS_DIR / name)


def main() -> int:
    try:
        build()
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"graphiql_assets: {error}", file=sys.stderr)
        if os.environ.get("CI"):
            return 1
        print("graphiql_assets: GraphiQL is not installed; /graphql says so", file=sys.stderr)
        return 0
    print(f"GraphiQL assets in {graphiql.ASSETS_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
