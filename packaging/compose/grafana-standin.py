#!/usr/bin/python3
"""A STAND-IN for grafana/grafana where no image registry is reachable (Debian has no Grafana;
packaging/compose/grafana.Dockerfile, scripts/compose-check.sh): NOT Grafana, but its file
provisioning read as Grafana reads it, from the official image's variables and paths, and the few
HTTP API endpoints that show the result:

    GF_PATHS_PROVISIONING        /etc/grafana/provisioning: datasources/*.yaml|yml (apiVersion 1,
                                 `datasources`), dashboards/*.yaml|yml (`providers` of type file,
                                 every *.json under options.path)
    GF_SERVER_HTTP_PORT          3000
    GF_SECURITY_ADMIN_USER / _PASSWORD   admin / admin: basic auth of the /api endpoints but health

    GET /api/health                                  {"database": "ok", "version": "standin"}
    GET /api/datasources                             the provisioned data sources
    GET /api/search                                  the provisioned dashboards (type dash-db)
    GET /api/dashboards/uid/{uid}                    {"dashboard": ..., "meta": {...}}
    GET /api/datasources/proxy/uid/{uid}/{path}      forwarded to the data source's url + path
                                                     (access proxy, as Grafana's data source proxy)
A provisioning file that does not parse, a data source without name, type or url, two defaults,
or a dashboard file that is not JSON with a uid stops it at start (exit 1), as Grafana logs and
skips such files (a stand-in that refuses is the stricter check).
"""
import base64
import glob
import json
import os
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

PROV = os.environ.get("GF_PATHS_PROVISIONING", "/etc/grafana/provisioning")
PORT = int(os.environ.get("GF_SERVER_HTTP_PORT", "3000"))
AUTH = "Basic " + base64.b64encode(("%s:%s" % (os.environ.get("GF_SECURITY_ADMIN_USER", "admin"),
                                               os.environ.get("GF_SECURITY_ADMIN_PASSWORD", "admin"))).encode()).decode()


def fail(msg):
    sys.exit("grafana stand-in: " + msg)


def yamls(sub):
    out = []
    for path in sorted(glob.glob(os.path.join(PROV, sub, "*.y*ml"))):
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        if doc.get("apiVersion") != 1:
            fail("%s: apiVersion is not 1" % path)
        out.append((path, doc))
    return out


DATASOURCES, DASHBOARDS = [], {}
for path, doc in yamls("datasources"):
    for i, ds in enumerate(doc.get("datasources") or []):
        if not all(ds.get(k) for k in ("name", "type", "url")):
            fail("%s: data source %d lacks name, type or url" % (path, i))
        ds = dict(ds, id=len(DATASOURCES) + 1, uid=ds.get("uid") or ds["name"], isDefault=bool(ds.get("isDefault")),
                  access=ds.get("access", "proxy"))
        DATASOURCES.append(ds)
if sum(d["isDefault"] for d in DATASOURCES) > 1:
    fail("more than one default data source")
for path, doc in yamls("dashboards"):
    for p in doc.get("providers") or []:
        if p.get("type", "file") != "file":
            continue
        folder = (p.get("options") or {}).get("path")
        if not folder or not os.path.isdir(folder):
            fail("%s: provider %r: options.path %r is not a folder" % (path, p.get("name"), folder))
        for fn in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
            try:
                with open(fn) as f:
                    dash = json.load(f)
            except ValueError as e:
                fail("%s: not JSON: %s" % (fn, e))
            if not dash.get("uid") or not dash.get("title"):
                fail("%s: a dashboard needs a uid and a title" % fn)
            DASHBOARDS[dash["uid"]] = (dash, p.get("name"), fn)
print("grafana stand-in: %d data sources, %d dashboards provisioned from %s" % (len(DATASOURCES), len(DASHBOARDS), PROV),
      file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="application/json"):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api/health":
            return self.send(200, {"database": "ok", "version": "standin"})
        if self.headers.get("Authorization") != AUTH:
            return self.send(401, {"message": "Unauthorized"})
        if path == "/api/datasources":
            return self.send(200, DATASOURCES)
        if path == "/api/search":
            return self.send(200, [{"uid": u, "title": d["title"], "type": "dash-db", "tags": d.get("tags", [])}
                                   for u, (d, _, _) in sorted(DASHBOARDS.items())])
        if path.startswith("/api/dashboards/uid/"):
            hit = DASHBOARDS.get(path.rsplit("/", 1)[1])
            if not hit:
                return self.send(404, {"message": "Dashboard not found"})
            return self.send(200, {"dashboard": hit[0], "meta": {"provisioned": True, "provisionedExternalId": hit[2]}})
        if path.startswith("/api/datasources/proxy/uid/"):
            uid, _, rest = path[len("/api/datasources/proxy/uid/"):].partition("/")
            ds = next((d for d in DATASOURCES if d["uid"] == uid), None)
            if not ds:
                return self.send(404, {"message": "Data source not found"})
            query = self.path[len(path):]
            try:
                with urllib.request.urlopen(ds["url"].rstrip("/") + "/" + rest + query, timeout=10) as r:
                    return self.send(r.status, r.read(), r.headers.get("Content-Type", "application/json"))
            except urllib.error.HTTPError as e:
                return self.send(e.code, e.read())
            except OSError as e:
                return self.send(502, {"message": "data source unreachable: %s" % e})
        return self.send(404, {"message": "Not found"})


srv = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
srv.daemon_threads = True
srv.serve_forever()
