"""A PgBouncer of a drill's own (Debian's package, pool_mode=transaction) in front of a PostgreSQL
that may move: `repoint` is what a pooler's failover hook does (a Patroni on_role_change callback,
an HAProxy health check, RDS Proxy itself): the [databases] entry names the new primary, RELOAD,
RECONNECT. The services' client connections stay open across it and are never told; only their own
checks of the ledger can find that it went back in time (issue 39, docs/design.md §5).

Used by the failover drill (scripts/drill.sh failover --pooler). The configuration is the
environment's (scripts/env_pgbouncer.sh): trust on loopback, roles looked up as postgres,
min_pool_size 2 with server_round_robin so that a client's transactions meet different server
connections.
"""
import os
import shutil
import socket
import subprocess
import time

import psycopg2

BIN = "/usr/sbin/pgbouncer"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """PgBouncer in `d` (created; owned by postgres), listening on a free loopback port, every
    database sent to 127.0.0.1:target_port."""

    def __init__(self, d, target_port):
        self.dir = d
        self.ini = os.path.join(d, "pgbouncer.ini")
        self.pidfile = os.path.join(d, "pgbouncer.pid")
        self.log = os.path.join(d, "pgbouncer.log")
        self.port = free_port()
        self.target = target_port
        self.repoints = 0
        os.makedirs(d, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(d, "postgres", "postgres")
        self._write()
        with open(os.path.join(d, "userlist.txt"), "w") as f:
            f.write('"postgres" ""\n')
        cmd = [BIN, "-d", self.ini]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
        end = time.time() + 10
        while time.time() < end:
            try:
                self.admin("SHOW VERSION")
                return
            except psycopg2.Error:
                time.sleep(0.1)
        raise RuntimeError("PgBouncer did not answer on 127.0.0.1:%d (log %s)" % (self.port, self.log))

    def _write(self):
        with open(self.ini, "w") as f:
            f.write("""; a drill's PgBouncer (tools/nifisim/llsim/pooler.py)
[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
pidfile = %s
logfile = %s
auth_type = trust
auth_file = %s/userlist.txt
auth_user = postgres
admin_users = postgres
pool_mode = transaction
max_client_conn = 200
default_pool_size = 10
min_pool_size = 2
reserve_pool_size = 0
server_round_robin = 1
server_connect_timeout = 3
server_login_retry = 1
query_wait_timeout = 60
ignore_startup_parameters = extra_float_digits
""" % (self.target, self.port, self.pidfile, self.log, self.dir))

    def admin(self, sql):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user="postgres",
                             connect_timeout=3)
        c.autocommit = True
        try:
            with c.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def repoint(self, target_port):
        """Every database now on 127.0.0.1:target_port: new server connections go there, the
        old ones close as they are released; the clients' connections stay."""
        self.target = target_port
        self._write()
        self.admin("RELOAD")
        self.admin("RECONNECT")
        self.repoints += 1

    def clients(self):
        """(user, database) of every client connection now (SHOW CLIENTS)."""
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user="postgres",
                             connect_timeout=3)
        c.autocommit = True
        try:
            with c.cursor() as cur:
                cur.execute("SHOW CLIENTS")
                cols = [d[0] for d in cur.description]
                return [dict(zip(cols, r)) for r in cur.fetchall()]
        finally:
            c.close()

    def stop(self):
        try:
            with open(self.pidfile) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        end = time.time() + 10
        while time.time() < end:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
