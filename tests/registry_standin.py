#!/usr/bin/env python3
"""A schema registry STAND-IN for the tests (issue 30): NOT Confluent's Schema Registry and not
Apicurio, but a small in-memory server of the documented Confluent REST endpoints the services
use, with fault injection. tests/integration/test_registry.py runs its main cases on a real
registry (Apicurio Registry 2.0.2, tests/registry/apicurio) and keeps this one for what a real
registry cannot be made to do on demand: answer 503, drop or hang a connection, and basic auth
(Apicurio 2.0.2 authenticates through Keycloak only). docs/design.md "Schema registry".

Endpoints (Confluent Schema Registry API reference; errors as {"error_code", "message"}):
    GET  /schemas/ids/{id}                  {"schema": "<text>"}  (404, 40403: unknown id)
    POST /subjects/{subject}/versions       {"schema": "<text>"[, "schemaType": "AVRO"]} -> {"id": N}
                                            (the same schema, compared as parsed JSON, keeps its
                                            id under any subject, as the registry does)
    POST /subjects/{subject}                lookup -> {"subject", "id", "version", "schema"} (404)
    GET  /subjects                          ["subject", ...]
    GET  /subjects/{subject}/versions       [1, 2, ...]
    GET  /subjects/{subject}/versions/latest, .../versions/{n}
and, for the fault tests only (prefix /_standin/):
    POST /_standin/fault {"status": 503, "count": N, "path": "/schemas/ids/"}  the next N requests
         whose path starts with "path" answer "status" (count -1: until cleared; {} clears);
         status "drop": the connection is closed without an answer; "hang": no answer for
         "seconds" (default 30), then the connection is closed
    POST /_standin/schema {"id": N, "schema": "<text>"}  puts a raw text under an id (no check:
         for a schema over the services' budgets)
    GET  /_standin/requests                 {"<path>": count, ...}

Usage: registry_standin.py [--port 0] [--port-file FILE] [--user-info user:password]
                           [--tls-cert PEM --tls-key PEM]  (HTTPS instead of HTTP)
The port it listens on (127.0.0.1) is written to --port-file once it listens.
"""
import argparse
import base64
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}        # id -> schema text
        self.subjects = {}     # subject -> [id of version 1, 2, ...]
        self.next_id = 1
        self.fault = None      # {"status", "count", "path"}
        self.requests = {}

    @staticmethod
    def canon(text):
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return None

    def register(self, subject, text):
        c = self.canon(text)
        if c is None:
            return None
        with self.lock:
            sid = next((i for i, t in self.by_id.items() if self.canon(t) == c), None)
            if sid is None:
                sid = self.next_id
                self.next_id += 1
                self.by_id[sid] = text
            versions = self.subjects.setdefault(subject, [])
            if sid not in versions:
                versions.append(sid)
            return sid


STORE = Store()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    user_info = None

    def log_message(self, fmt, *args):  # quiet; the tests count requests instead
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code, message):
        self.reply(status, {"error_code": code, "message": message})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def gate(self):
        """Counts the request, applies an injected fault and the basic auth; True: answered."""
        path = self.path.split("?")[0]
        with STORE.lock:
            STORE.requests[path] = STORE.requests.get(path, 0) + 1
            f = STORE.fault
            if f and not path.startswith("/_standin/") and path.startswith(f.get("path", "/")) and f["count"]:
                if f["count"] > 0:
                    f["count"] -= 1
                status = f["status"]
            else:
                status = None
        if status is not None:
            if self.command == "POST":
                self.body()
            if status in ("drop", "hang"):
                if status == "hang":
                    time.sleep(f.get("seconds", 30))
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return True
            self.error(status, status * 100, "injected fault")
            return True
        if self.user_info and not path.startswith("/_standin/"):
            want = "Basic " + base64.b64encode(self.user_info.encode()).decode()
            if self.headers.get("Authorization") != want:
                if self.command == "POST":
                    self.body()
                self.error(401, 40101, "unauthorized")
                return True
        return False

    def do_GET(self):
        if self.gate():
            return
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/schemas/ids/(\d+)", path)
        if m:
            text = STORE.by_id.get(int(m.group(1)))
            if text is None:
                return self.error(404, 40403, "Schema %s not found" % m.group(1))
            return self.reply(200, {"schema": text})
        if path == "/subjects":
            return self.reply(200, sorted(STORE.subjects))
        m = re.fullmatch(r"/subjects/([^/]+)/versions(?:/(latest|\d+))?", path)
        if m:
            versions = STORE.subjects.get(m.group(1))
            if versions is None:
                return self.error(404, 40401, "Subject not found")
            if m.group(2) is None:
                return self.reply(200, list(range(1, len(versions) + 1)))
            v = len(versions) if m.group(2) == "latest" else int(m.group(2))
            if not 1 <= v <= len(versions):
                return self.error(404, 40402, "Version not found")
            sid = versions[v - 1]
            return self.reply(200, {"subject": m.group(1), "version": v, "id": sid, "schema": STORE.by_id[sid]})
        if path == "/_standin/requests":
            with STORE.lock:
                return self.reply(200, dict(STORE.requests))
        return self.error(404, 404, "not found")

    def do_POST(self):
        if self.gate():
            return
        path = self.path.split("?")[0]
        req = self.body()
        if req is None:
            return self.error(422, 42201, "invalid JSON")
        if path == "/_standin/fault":
            with STORE.lock:
                st = req.get("status")
                STORE.fault = ({"status": st if st in ("drop", "hang") else int(st),
                                "count": int(req.get("count", -1)), "path": req.get("path", "/"),
                                "seconds": float(req.get("seconds", 30))} if req else None)
            return self.reply(200, {})
        if path == "/_standin/schema":
            with STORE.lock:
                STORE.by_id[int(req["id"])] = req["schema"]
            return self.reply(200, {})
        m = re.fullmatch(r"/subjects/([^/]+)(/versions)?", path)
        if not m:
            return self.error(404, 404, "not found")
        if req.get("schemaType", "AVRO") != "AVRO" or not isinstance(req.get("schema"), str):
            return self.error(422, 42201, "Invalid schema")
        subject = m.group(1)
        if m.group(2):
            sid = STORE.register(subject, req["schema"])
            if sid is None:
                return self.error(422, 42201, "Invalid schema")
            return self.reply(200, {"id": sid})
        c = STORE.canon(req["schema"])
        for v, sid in enumerate(STORE.subjects.get(subject, []), 1):
            if STORE.canon(STORE.by_id[sid]) == c:
                return self.reply(200, {"subject": subject, "version": v, "id": sid, "schema": STORE.by_id[sid]})
        return self.error(404, 40403, "Schema not found")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--user-info")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    a = ap.parse_args()
    Handler.user_info = a.user_info
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    if a.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]))
        import os
        os.replace(a.port_file + ".tmp", a.port_file)
    print("registry stand-in listening on 127.0.0.1:%d" % srv.server_address[1], file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
