"""DuckDB's delta_scan and iceberg_scan, run in their own venv with the extensions installed from PyPI.

DuckDB downloads its extensions at run time, which is not possible offline; the duckdb-ext-* wheels
carry the binaries, but for one DuckDB version only (1.4.4), while .venv has a newer DuckDB. So they
live in `.venv-duckdb` at the repo root, created on first use and reused while its stamp file matches
the pins below (tests.helpers.side_venv; about 13 s with pip's cache warm). A failed install fails the
test, it does not skip it. Set PAGEINDEX_DUCKDB_VENV to use another location.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

from tests.helpers import s3 as s3h
from tests.helpers.paths import REPO_ROOT
from tests.helpers.side_venv import SideVenv

DUCKDB_VERSION = "1.4.4"
EXTENSIONS_BUILD = f"{DUCKDB_VERSION}.20260205"
# iceberg loads avro on start; httpfs serves s3:// (CREATE SECRET TYPE S3 needs it, for delta_scan too);
# the wheels' binaries only load in the DuckDB they were built for.
PINS = (
    f"duckdb=={DUCKDB_VERSION}",
    "duckdb-ext==0.1.2",
    f"duckdb-ext-delta=={EXTENSIONS_BUILD}",
    f"duckdb-ext-iceberg=={EXTENSIONS_BUILD}",
    f"duckdb-ext-avro=={EXTENSIONS_BUILD}",
    f"duckdb-ext-httpfs=={EXTENSIONS_BUILD}",
)
VENV = SideVenv(Path(os.environ.get("PAGEINDEX_DUCKDB_VENV", REPO_ROOT / ".venv-duckdb")), PINS, "duckdb", 540)
SCAN_TIMEOUT_S = 120

# Runs inside .venv-duckdb. argv: table function (delta_scan or iceberg_scan), location, columns, and
# the S3 secret's settings as JSON (or "null"). Prints the rows and the data files DuckDB read them from.
SCAN_SCRIPT = textwrap.dedent(r'''
    import json, sys
    import duckdb, duckdb_ext

    function, location, columns, s3 = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    con = duckdb_ext.init(duckdb.connect())
    con.execute("LOAD " + function.removesuffix("_scan"))
    if s3:
        con.execute("LOAD httpfs")
        # CREATE SECRET takes no parameters; the values are the moto fixture's, without quotes
        con.execute("CREATE SECRET (TYPE S3, " + ", ".join(f"{k} '{v}'" for k, v in s3.items()) + ")")
    # filename is a virtual column of both; iceberg_scan's filename=true option crashes DuckDB 1.4.4
    result = con.execute(f"SELECT {columns}, filename FROM {function}(?)", [location])
    rows = result.fetchall()
    print(json.dumps({"rows": [list(r[:-1]) for r in rows], "files": sorted({r[-1] for r in rows})}))
''')


def s3_secret(endpoint: str) -> dict[str, str]:
    """DuckDB's S3 secret for the moto server at `endpoint` (http://host:port); httpfs and the delta
    extension's object store both take their settings from it."""
    return {"KEY_ID": s3h.ACCESS_KEY, "SECRET": s3h.SECRET_KEY, "REGION": s3h.REGION,
            "ENDPOINT": endpoint.removeprefix("http://"), "URL_STYLE": "path", "USE_SSL": "false"}


def duckdb_scan(python: Path, function: str, location: str, columns: tuple[str, ...],
                s3_endpoint: str | None = None) -> tuple[list[tuple], set[str]]:
    """Sorted rows of `function(location)` and the names of the data files DuckDB read them from;
    with `s3_endpoint`, through an S3 secret for that moto server."""
    secret = s3_secret(s3_endpoint) if s3_endpoint else None
    # without the moto fixture's AWS_* variables, so the secret is all DuckDB has to reach the server
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run([str(python), "-c", SCAN_SCRIPT, function, location, ", ".join(columns), json.dumps(secret)],
                          check=False, capture_output=True, text=True, timeout=SCAN_TIMEOUT_S,
                          stdin=subprocess.DEVNULL, env=env)
    assert proc.returncode == 0, f"DuckDB {function}({location}) failed:\n{proc.stderr[-4000:]}"
    out = json.loads(proc.stdout)
    return sorted(tuple(r) for r in out["rows"]), {Path(f).name for f in out["files"]}
