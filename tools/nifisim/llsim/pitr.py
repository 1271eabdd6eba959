"""A PostgreSQL cluster of one drill, with WAL archiving, for the point-in-time recovery drill
(issue 27 §4, tests/integration/test_pitr_drill.py, docs/operations.md "Restore from a backup").

A point-in-time recovery restores a whole cluster, so the drill cannot use the shared cluster of
scripts/env.sh: Cluster makes a throwaway one as env.sh does (initdb as the `postgres` OS user
when run as root, trust auth, loopback only, a port of its own), with `wal_level = replica`,
`archive_mode = on` and an `archive_command` that copies each WAL segment into archive/, and
`track_commit_timestamp = on` (the drill reads when the workload's last ledger change committed).
Everything lives in one folder (made readable by `postgres`), removed by close().

    cluster.start()                  # initdb data/ on first use
    cluster.base_backup()            # pg_basebackup -X stream into backup/, while the services run
    cluster.stop(archive=True)       # the current WAL segment archived first
    cluster.recover(target_time)     # backup/ copied into a fresh data dir, recovery.signal,
                                     # restore_command from archive/, recovery_target_time,
                                     # recovery_target_action = promote; started, promoted
"""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

import psycopg2

from .drills import wait_until


def free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


class Cluster:
    """A throwaway PostgreSQL cluster with a WAL archive (module docstring)."""

    def __init__(self, bindir, dbname):
        self.bindir = bindir
        self.dbname = dbname  # created with the cluster, as env.sh creates LL_PG_DB
        self.dir = tempfile.mkdtemp(prefix="ll-pitr-", dir="/tmp")
        self.archive = os.path.join(self.dir, "archive")
        self.backup = os.path.join(self.dir, "backup")
        self.sock = os.path.join(self.dir, "sock")
        self.log = os.path.join(self.dir, "postgres.log")
        self.generation = 0
        self.data = os.path.join(self.dir, "data0")
        self.port = free_port()
        self.running = False
        self.root = os.geteuid() == 0
        os.chmod(self.dir, 0o755)
        for d in (self.archive, self.sock):
            os.makedirs(d)
        if self.root:
            pw = pwd.getpwnam("postgres")
            for d in (self.dir, self.archive, self.sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)

    @property
    def pg(self):
        return {"host": "127.0.0.1", "port": self.port}

    def _as_pg(self, *cmd, timeout=120):
        """A PostgreSQL tool as the postgres OS user when root (the server refuses root), from a
        folder it can read."""
        cmd = [os.path.join(self.bindir, cmd[0])] + list(cmd[1:])
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        p = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, "%s failed: rc %d, %s %s (log %s)" % (cmd, p.returncode, p.stdout, p.stderr,
                                                                      self.log)
        return p

    def _conf(self):
        return "\n".join([
            "# the point-in-time recovery drill's cluster (llsim/pitr.py)",
            "listen_addresses = '127.0.0.1'",
            "port = %d" % self.port,
            "unix_socket_directories = '%s'" % self.sock,
            "max_connections = 100",
            "fsync = off",  # a throwaway cluster, stopped cleanly; commits stay synchronous
            "synchronous_commit = on",
            "wal_level = replica",
            "archive_mode = on",
            "archive_command = 'test ! -f %s/%%f && cp %%p %s/%%f'" % (self.archive, self.archive),
            "track_commit_timestamp = on",
            "timezone = 'UTC'",
            "log_timezone = 'UTC'",
        ]) + "\n"

    def connect(self, dbname="postgres"):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, dbname=dbname, user="postgres", connect_timeout=5)
        c.autocommit = True
        return c

    def start(self):
        """Starts the cluster (initdb and the drill's database on first use)."""
        fresh = not os.path.exists(os.path.join(self.data, "PG_VERSION"))
        if fresh:
            self._as_pg("initdb", "-D", self.data, "-U", "postgres", "--auth-local=trust", "--auth-host=trust",
                        "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
            self._write(os.path.join(self.data, "postgresql.conf"), self._conf(), append=True)
        self._as_pg("pg_ctl", "start", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-s")
        self.running = True
        if fresh:
            c = self.connect()
            with c.cursor() as cur:
                cur.execute('CREATE DATABASE "%s"' % self.dbname)
            c.close()

    def _write(self, path, text, append=False):
        with open(path, "a" if append else "w") as f:
            f.write(text)
        if self.root:
            pw = pwd.getpwnam("postgres")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def base_backup(self):
        """pg_basebackup of the running cluster into backup/ (plain, the WAL it needs streamed)."""
        self._as_pg("pg_basebackup", "-D", self.backup, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                    "-X", "stream", "-c", "fast", "--no-sync")

    def stop(self, archive=False):
        """Stops the cluster (fast). archive: first commit a row into drill_end (database
        postgres), switch to a new WAL segment and wait until the archiver has copied the one that
        holds the last commits (a stop does not archive the segment in use)."""
        if not self.running:
            return
        if archive:
            c = self.connect()
            with c.cursor() as cur:
                # a commit after every instant of the drill: recovery to a target time stops at
                # the first commit after it and fails if the WAL ends before one
                cur.execute("CREATE TABLE IF NOT EXISTS drill_end (at timestamptz)")
                cur.execute("INSERT INTO drill_end VALUES (clock_timestamp())")
                cur.execute("SELECT pg_walfile_name(pg_switch_wal())")
                seg = cur.fetchone()[0]

                def archived():
                    cur.execute("SELECT last_archived_wal FROM pg_stat_archiver")
                    last = cur.fetchone()[0]
                    return last is not None and last[8:] >= seg[8:]  # same timeline here

                wait_until(archived, 60, "WAL segment %s archived" % seg)
            c.close()
        self._as_pg("pg_ctl", "stop", "-D", self.data, "-m", "fast", "-w", "-t", "60", "-s")
        self.running = False

    def recover(self, target_time):
        """The base backup restored into a fresh data dir and recovered from the archive to
        target_time (an aware datetime): recovery.signal, restore_command, recovery_target_time,
        recovery_target_action = promote. Returns once the cluster is promoted and answers;
        the old data dir stays (the lost cluster, stopped)."""
        assert not self.running
        self.generation += 1
        self.data = os.path.join(self.dir, "data%d" % self.generation)
        shutil.copytree(self.backup, self.data, symlinks=True)
        if self.root:
            subprocess.run(["chown", "-R", "postgres:postgres", self.data], check=True, timeout=60)
        os.chmod(self.data, 0o700)
        self._write(os.path.join(self.data, "postgresql.auto.conf"), "\n".join([
            "restore_command = 'cp %s/%%f %%p'" % self.archive,
            "recovery_target_time = '%s'" % target_time.isoformat(),
            "recovery_target_action = 'promote'",
        ]) + "\n", append=True)
        self._write(os.path.join(self.data, "recovery.signal"), "")
        self._as_pg("pg_ctl", "start", "-D", self.data, "-l", self.log, "-w", "-t", "120", "-s")
        self.running = True

        def promoted():
            try:
                c = self.connect()
            except psycopg2.OperationalError:
                return False
            try:
                with c.cursor() as cur:
                    cur.execute("SELECT NOT pg_is_in_recovery()")
                    return cur.fetchone()[0]
            finally:
                c.close()

        wait_until(promoted, 120, "the recovered cluster promoted")

    def close(self):
        """Stops the cluster if it runs (immediate) and removes its folder."""
        if self.running:
            try:
                self._as_pg("pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w", "-t", "30", "-s")
            except AssertionError:
                pass
            self.running = False
        for _ in range(3):
            shutil.rmtree(self.dir, ignore_errors=True)
            if not os.path.exists(self.dir):
                break
            time.sleep(0.5)
