"""Runs SQL on the current ClickHouse engine in-process (chdb-core from PyPI), for the
compatibility suite (test/clickhouse/compat.test.ts). chdb has no HTTP server, so the suite
hands its statements here.

stdin: {"path": "<session dir>", "steps": [{"sql": "...", "format": "JSONEachRow"?}, ...]}
stdout: {"version": "...", "results": [{"ok": true, "output": "..."} | {"ok": false, "error": "..."}]}
An insert body travels as a file (`INSERT ... FROM INFILE 'path' FORMAT TabSeparated`), so the
engine reads the exact bytes the worker would send.
"""
import json
import sys

import chdb.session as chs

req = json.load(sys.stdin)
session = chs.Session(req["path"])
results = []
for step in req["steps"]:
    try:
        out = session.query(step["sql"], step.get("format", "TabSeparated"))
        results.append({"ok": True, "output": out.bytes().decode("utf-8")})
    except Exception as e:  # the engine's own message is what the suite checks
        results.append({"ok": False, "error": str(e)})
version = session.query("SELECT version()", "TabSeparated").bytes().decode().strip()
session.close()
json.dump({"version": version, "results": results}, sys.stdout)
