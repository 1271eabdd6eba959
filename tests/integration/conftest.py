"""Fixtures of the integration tests: the real broker and database of scripts/env.sh, the
loadledger services of this build, and NiFi's side played by tools/nifisim."""
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "nifisim"))

from llsim.flow import Flow  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402
from llsim.scenario import Run  # noqa: E402
from llsim.stack import Stack  # noqa: E402


@pytest.fixture(scope="module")
def stack():
    """Migrated ledger and the four services, stopped (and checked for a clean exit) at the end."""
    s = Stack()
    s.migrate()
    s.start_all()
    yield s
    codes = s.stop_all()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


@pytest.fixture(scope="module")
def nifi(stack):
    return Nifi(stack.bootstrap, stack.prefix)


@pytest.fixture
def flow(nifi):
    f = Flow(nifi)
    yield f
    f.close()


@pytest.fixture
def db(stack):
    c = stack.db()
    yield c.cursor()
    c.close()


def close_clean(iso):
    """Closes a drill (llsim.drills.Isolated: stops its services, drops its database and topics)
    and fails the test when a service did not exit cleanly (a sanitizer report or a crash)."""
    codes = iso.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, iso.stack.log_dir)


def new_run(**kw):
    """A reference-scenario run with a business key of its own (one active run per key)."""
    kw.setdefault("business_key", "2026-09-28.t" + uuid.uuid4().hex[:10])
    return Run(**kw)


def one(cur, sql, *args):
    cur.execute(sql, args)
    row = cur.fetchone()
    return row[0] if row and len(row) == 1 else row


def rows(cur, sql, *args):
    """Every row of a query, as tuples."""
    cur.execute(sql, args)
    return cur.fetchall()


def built_nifi_project(name, project=None):
    """A NiFi-side Maven project (tests/nifi, tests/nifi-flow) built under the build tree's
    tests/<name>: (jdk, class path, output folder). Skips without a JDK of llsim.nifijava.MIN_JAVA
    or later (NiFi 2.x's classes need it), fails then when CI is set."""
    from llsim import nifijava
    jdk = nifijava.find_jdk()
    if jdk is None:
        msg = "no JDK %d or later (NiFi 2.6.0's classes need it): set LL_NIFI_JAVA_HOME" % nifijava.MIN_JAVA
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    build_dir = os.environ.get("LL_BUILD_DIR", os.path.join(nifijava.REPO, "build"))
    out = os.path.join(os.path.abspath(build_dir), "tests", name)
    kw = {"project": project} if project else {}
    return jdk, nifijava.build(jdk, out, os.path.join(out, "mvn.log"), **kw), out
