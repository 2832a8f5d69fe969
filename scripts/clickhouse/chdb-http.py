"""A test endpoint that answers as ClickHouse's HTTP handler does, around ClickHouse 26.9's own
engine in-process (chdb-core from PyPI). It is not a ClickHouse server: it lets the worker's whole
HTTP conversation (client, headers, status codes, error bodies, keep-alive) meet the current engine,
which ships no HTTP server of its own.

    chdb-http.py --port 8127 --path DIR [--user default] [--password ''] [--grants F] [--pidfile F]

What it adds beyond the engine (docs/compatibility.md "ClickHouse 26.9 test endpoint" lists the same):
- HTTP/1.1 with keep-alive (idle connections close after 10 s, ClickHouse's keep_alive_timeout),
  Content-Length and chunked request bodies, gzip/deflate request bodies, gzip responses when
  `enable_http_compression=1` and the client accepts it;
- `GET /ping` and `GET /` answer `Ok.`; `GET|POST /?query=…` with the body appended as ClickHouse
  does (query, a newline, then the body: for `INSERT … FORMAT X` the body is the data);
- URL parameters: `database`, `default_format`, `query_id`, `param_<name>` (query parameters),
  `user`/`password`; every other parameter is a setting, applied with SET for that request only;
  request headers `X-ClickHouse-User`, `-Key`, `-Database`, `-Format`;
- one user and password, checked here (the engine has no users): anything else is answered as the
  server does, `Code: 516 … (AUTHENTICATION_FAILED)` with HTTP 403;
- each exception's HTTP status from ClickHouse's exceptionCodeToHTTPStatus (src/Server/HTTP/), the
  `X-ClickHouse-Exception-Code` header, and the engine's text with ` (version 26.9.x)` appended
  where the engine left the server's suffix out;
- response headers `X-ClickHouse-Query-Id`, `-Format`, `-Timezone`, `-Server-Display-Name`,
  `-Summary`;
- `--grants F`: the engine's one user holds exactly the privileges that the `GRANT … ON … TO role`
  statements in F give a role (as `cdr-worker migrate --print-grants` prints them), and nothing
  else: the engine checks them itself on every statement. It has no roles or SQL users of its own
  (clickhouse-local reads users from users.xml alone), so they become that user's users.xml grants;
- `readonly=1|2` is enforced here, as the server's text says it (`Code: 164 … (READONLY)`): the
  engine's one session could not leave readonly mode again;
- one statement runs at a time (the engine is one session); concurrent requests wait their turn;
- the data of `INSERT … FORMAT X` sent as the body is handed to the engine as a file (`FROM INFILE`),
  not appended to the statement's text: the engine's query text path drops newline bytes from
  binary data (`00 00 0a 0a` as a UInt32 came out two bytes short), which a server's body stream
  never does; the file's name is taken out of error texts again;
- a body cut off before its end is never executed: the data of an insert is read whole first.
  (The server streams an insert's data into blocks as it reads; an insert of fewer rows than
  max_insert_block_size is one block there too, so both store all of it or none.)
"""
import argparse
import base64
import gzip
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import chdb.session as chs

# URL parameters the server's HTTP handler reads itself; every other one is a setting.
RESERVED = {
    "query", "database", "default_format", "query_id", "user", "password", "quota_key", "session_id",
    "session_timeout", "session_check", "close_session", "compress", "decompress", "buffer_size",
    "wait_end_of_query", "stacktrace", "role", "client_protocol_version",
}

# ClickHouse's exceptionCodeToHTTPStatus, by the exception's type name (every 26.9 message ends
# with it); anything else is 500, as there.
STATUS_BY_TYPE = {
    "REQUIRED_PASSWORD": 401,
    **{t: 403 for t in ("UNKNOWN_USER", "WRONG_PASSWORD", "AUTHENTICATION_FAILED", "SET_NON_GRANTED_ROLE", "ACCESS_DENIED")},
    **{t: 400 for t in (
        "BAD_ARGUMENTS", "CANNOT_COMPILE_REGEXP", "CANNOT_PARSE_TEXT", "CANNOT_PARSE_ESCAPE_SEQUENCE",
        "CANNOT_PARSE_QUOTED_STRING", "CANNOT_PARSE_DATE", "CANNOT_PARSE_DATETIME", "CANNOT_PARSE_NUMBER",
        "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING", "CANNOT_PARSE_IPV4", "CANNOT_PARSE_IPV6",
        "CANNOT_PARSE_INPUT_ASSERTION_FAILED", "CANNOT_PARSE_UUID", "DUPLICATE_COLUMN", "ILLEGAL_COLUMN",
        "UNKNOWN_ELEMENT_IN_AST", "UNKNOWN_TYPE_OF_AST_NODE", "THERE_IS_NO_COLUMN", "TOO_DEEP_AST", "TOO_BIG_AST",
        "UNEXPECTED_AST_STRUCTURE", "SYNTAX_ERROR", "INCORRECT_DATA", "TYPE_MISMATCH",
        "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE")},
    **{t: 404 for t in (
        "UNKNOWN_TABLE", "UNKNOWN_FUNCTION", "UNKNOWN_IDENTIFIER", "UNKNOWN_TYPE", "UNKNOWN_STORAGE",
        "UNKNOWN_DATABASE", "UNKNOWN_SETTING", "UNKNOWN_DIRECTION_OF_SORTING", "UNKNOWN_AGGREGATE_FUNCTION",
        "UNKNOWN_FORMAT", "UNKNOWN_DATABASE_ENGINE", "UNKNOWN_TYPE_OF_QUERY", "UNKNOWN_ROLE")},
    "QUERY_IS_TOO_LARGE": 413,
    "NOT_IMPLEMENTED": 501,
    "SOCKET_TIMEOUT": 503,
    "CANNOT_OPEN_FILE": 503,
    "HTTP_LENGTH_REQUIRED": 411,
    "TIMEOUT_EXCEEDED": 408,
    "CANNOT_SCHEDULE_TASK": 503,
    "UNSUPPORTED_MEDIA_TYPE": 415,
}

CONTENT_TYPES = {
    "TabSeparated": "text/tab-separated-values; charset=UTF-8",
    "TSV": "text/tab-separated-values; charset=UTF-8",
    "JSON": "application/json; charset=UTF-8",
    "JSONCompact": "application/json; charset=UTF-8",
    "JSONEachRow": "application/x-ndjson; charset=UTF-8",
    "CSV": "text/csv; charset=UTF-8; header=absent",
}

TYPE_SUFFIX = re.compile(r"\(([A-Z][A-Z0-9_]*)\)(?: \(version [^)]*\))?\s*$")
READ_ONLY_STATEMENT = re.compile(rb"\s*(SELECT|SHOW|DESCRIBE|DESC|EXISTS|WITH|EXPLAIN)\b", re.I)
FORMAT_CLAUSE = re.compile(rb"\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*;?\s*$", re.I)
INSERT_FORMAT = re.compile(rb"^(\s*INSERT\b.*?)\s+(FORMAT\s+[A-Za-z][A-Za-z0-9_]*)\s*;?\s*$", re.I | re.S)
INFILE_NOTE = re.compile(r": \(in file/uri [^)]*\)")


class QueryError(Exception):
    """An exception as the server would write it: code, type name and text."""

    def __init__(self, code, type_name, text):
        super().__init__(text)
        self.code, self.type_name, self.text = code, type_name, text


def engine_config(path, grants_file):
    """A config whose users.xml gives the engine's user (`default`, the only one it logs in as)
    exactly the privileges the file's role grants carry."""
    grants = []
    with open(grants_file) as f:
        for stmt in f.read().split(";"):
            m = re.match(r"\s*GRANT\s+(.+?)\s+ON\s+(\S+)\s+TO\s+\w+\s*$", stmt, re.S | re.I)
            if m:
                grants.append(f"<query>GRANT {m.group(1)} ON {m.group(2)}</query>")
    conf_dir = path.rstrip("/") + "-config"
    os.makedirs(conf_dir, exist_ok=True)
    with open(f"{conf_dir}/users.xml", "w") as f:
        f.write("<clickhouse><profiles><default/></profiles><quotas><default/></quotas><users><default>"
                "<password/><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota>"
                f"<grants>{''.join(grants)}</grants></default></users></clickhouse>")
    with open(f"{conf_dir}/config.xml", "w") as f:
        f.write(f"<clickhouse><user_directories><users_xml><path>{conf_dir}/users.xml</path></users_xml>"
                "</user_directories></clickhouse>")
    return f"{conf_dir}/config.xml"


class Engine:
    """The one chdb session, one statement at a time; settings and database per request."""

    def __init__(self, path, grants=None):
        self.session = chs.Session(path if grants is None else f"file:{path}?config-file={engine_config(path, grants)}")
        self.lock = threading.Lock()
        self.version = self.session.query("SELECT version()", "TabSeparated").bytes().decode().strip()
        self.timezone = self.session.query("SELECT timezone()", "TabSeparated").bytes().decode().strip()

    def as_server_error(self, e):
        text = str(e).strip()
        m = re.match(r"Code: (\d+)\.", text)
        code = int(m.group(1)) if m else 1001  # STD_EXCEPTION, as the server says for a foreign one
        t = TYPE_SUFFIX.search(text)
        type_name = t.group(1) if t else "STD_EXCEPTION"
        if not m:
            text = f"Code: {code}. DB::Exception: {text}. ({type_name})"
        if not re.search(r"\(version [^)]*\)\s*$", text):
            text = f"{text} (version {self.version})"
        return QueryError(code, type_name, text)

    def run(self, sql, fmt, settings, database, params):
        with self.lock:
            applied = []
            try:
                for k, v in settings:
                    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                        raise QueryError(115, "UNKNOWN_SETTING", f"Code: 115. DB::Exception: Unknown setting '{k}'. (UNKNOWN_SETTING) (version {self.version})")
                    self.session.query(f"SET {k} = '{esc(v)}'")
                    applied.append(k)
                self.session.query(f"USE `{database}`")
                return self.session.query(sql, fmt, params=params or None)
            except QueryError:
                raise
            except Exception as e:  # the engine's own exception: its text is what the client parses
                raise self.as_server_error(e) from e
            finally:
                for k in applied:
                    try:
                        self.session.query(f"SET {k} = DEFAULT")
                    except Exception as e:
                        sys.stderr.write(f"chdb-http: could not reset setting {k}: {e}\n")
                try:
                    self.session.query("USE default")
                except Exception:
                    pass


def esc(v):
    return v.replace("\\", "\\\\").replace("'", "\\'")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chdb-http"
    timeout = 10  # keep_alive_timeout: an idle kept-alive connection is closed
    # Headers and body go out as two writes: without TCP_NODELAY each answer waits out the
    # client's delayed ACK (40 ms), which no ClickHouse server does.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def do_GET(self):
        self.handle_request(b"")

    def do_POST(self):
        body = self.read_body()
        if body is None:
            self.close_connection = True  # cut off: never executed, as the server aborts the insert
            return
        self.handle_request(body)

    def read_body(self):
        try:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                parts = []
                while True:
                    line = self.rfile.readline(65537)
                    if not line:
                        return None
                    size = int(line.split(b";")[0].strip(), 16)
                    if size == 0:
                        while True:  # trailers end with an empty line
                            t = self.rfile.readline(65537)
                            if t in (b"\r\n", b"\n"):
                                break
                            if not t:
                                return None
                        break
                    chunk = self.rfile.read(size)
                    if len(chunk) != size or self.rfile.read(2) != b"\r\n":
                        return None
                    parts.append(chunk)
                body = b"".join(parts)
            else:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                if len(body) != n:
                    return None
        except (OSError, ValueError):
            return None
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            body = gzip.decompress(body)
        elif enc == "deflate":
            body = zlib.decompress(body)
        return body

    def handle_request(self, body):
        url = urlsplit(self.path)
        if url.path == "/ping" or (url.path == "/" and not url.query and not body):
            return self.reply(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"})
        if url.path != "/":
            return self.fail(QueryError(0, "", f"There is no handle {url.path}\n\nUse / or /ping for health checks.\n"), 404)
        q = dict(parse_qsl(url.query, keep_blank_values=True))
        engine = self.server.engine
        query_id = q.get("query_id") or str(uuid.uuid4())
        extra = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": engine.timezone}
        user, password = self.credentials(q)
        if user != self.server.user or password != self.server.password:
            return self.fail(QueryError(516, "AUTHENTICATION_FAILED",
                f"Code: 516. DB::Exception: {user}: Authentication failed: password is incorrect, or there is no user "
                f"with such name. (AUTHENTICATION_FAILED) (version {engine.version})"), extra=extra)
        sql = q.get("query", "").encode()
        infile = None
        insert = INSERT_FORMAT.match(sql) if sql and body else None
        if insert:
            infile = os.path.join(self.server.spool, f"{uuid.uuid4().hex}.bin")
            with open(infile, "wb") as f:
                f.write(body)
            sql = insert.group(1) + b" FROM INFILE '" + infile.encode() + b"' " + insert.group(2)
        elif sql and body:
            sql += b"\n" + body
        elif body:
            sql = body
        if not sql.strip():
            return self.fail(QueryError(62, "SYNTAX_ERROR", f"Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR) (version {engine.version})"), extra=extra)
        fmt = q.get("default_format") or self.headers.get("X-ClickHouse-Format") or "TabSeparated"
        database = q.get("database") or self.headers.get("X-ClickHouse-Database") or "default"
        settings = [(k, v) for k, v in q.items() if k not in RESERVED and not k.startswith("param_") and k != "readonly"]
        if q.get("readonly", "0") != "0" and not READ_ONLY_STATEMENT.match(sql):
            return self.fail(QueryError(164, "READONLY", f"Code: 164. DB::Exception: {user}: Cannot execute query in readonly mode. (READONLY) (version {engine.version})"), extra=extra)
        params = {k[6:]: v for k, v in q.items() if k.startswith("param_")}
        started = time.monotonic_ns()
        try:
            result = engine.run(sql, fmt, settings, database, params)
        except QueryError as e:
            if infile:
                e = QueryError(e.code, e.type_name, INFILE_NOTE.sub("", e.text))
            return self.fail(e, extra=extra)
        finally:
            if infile:
                os.unlink(infile)
        m = FORMAT_CLAUSE.search(sql[:4096] if sql.lstrip()[:6].upper() != b"INSERT" else b"")
        out_fmt = m.group(1).decode() if m else fmt
        data = result.bytes() if result is not None else b""
        summary = {
            "read_rows": str(result.rows_read() if result else 0),
            "read_bytes": str(result.bytes_read() if result else 0),
            "written_rows": str(result.rows_written() if result else 0),
            "written_bytes": str(result.bytes_written() if result else 0),
            "total_rows_to_read": "0", "result_rows": "0", "result_bytes": "0",
            "elapsed_ns": str(time.monotonic_ns() - started),
        }
        headers = {
            **extra,
            "Content-Type": CONTENT_TYPES.get(out_fmt, "text/plain; charset=UTF-8"),
            "X-ClickHouse-Format": out_fmt,
            "X-ClickHouse-Summary": json.dumps(summary, separators=(",", ":")),
        }
        if q.get("enable_http_compression") == "1" and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        self.reply(200, data, headers)

    def credentials(self, q):
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("basic "):
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                return user or "default", password
            except ValueError:
                pass
        user = self.headers.get("X-ClickHouse-User") or q.get("user") or "default"
        password = self.headers.get("X-ClickHouse-Key") or q.get("password") or ""
        return user, password

    def fail(self, e, status=None, extra=None):
        headers = {**(extra or {}), "Content-Type": "text/plain; charset=UTF-8"}
        if e.code:
            headers["X-ClickHouse-Exception-Code"] = str(e.code)
        self.reply(status or STATUS_BY_TYPE.get(e.type_name, 500), (e.text.rstrip("\n") + "\n").encode(), headers)

    def reply(self, status, data, headers):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("X-ClickHouse-Server-Display-Name", self.server.display_name)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Keep-Alive", "timeout=10")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8127)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--path", required=True, help="the engine's data directory")
    ap.add_argument("--user", default="default")
    ap.add_argument("--password", default="")
    ap.add_argument("--grants", help="a file of GRANT … ON … TO role statements the engine's user gets")
    ap.add_argument("--pidfile")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.path, exist_ok=True)
    server = ThreadingHTTPServer((a.host, a.port), Handler)
    server.daemon_threads = True
    server.engine = Engine(a.path, a.grants)
    # Insert bodies as files (FROM INFILE), beside the engine's directory, one file a request.
    server.spool = a.path.rstrip("/") + "-spool"
    os.makedirs(server.spool, exist_ok=True)
    server.user, server.password, server.verbose = a.user, a.password, a.verbose
    server.display_name = socket.gethostname()
    if a.pidfile:
        with open(a.pidfile, "w") as f:
            f.write(str(os.getpid()))
    sys.stderr.write(f"chdb-http: ClickHouse engine {server.engine.version} on http://{a.host}:{a.port}\n")
    try:
        server.serve_forever()
    finally:
        server.engine.session.close()


if __name__ == "__main__":
    main()
