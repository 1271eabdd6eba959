"""The migration rule of a rolling upgrade (docs/upgrading.md, "The compatibility rule"), as the
upgrade drill checks it before it starts (tools/nifisim/llsim/upgrade_base.py): the migrations
this tree adds since release N (BASE_COMMIT) only expand, and no released migration was edited;
and the check itself tells an expand statement from a contract one. Needs the git history (the
commit), not the broker or the database."""
import os

import pytest

from llsim import upgrade_base
from llsim.avroframe import REPO


def test_this_tree_only_expands_since_release_n(tmp_path):
    full = upgrade_base.resolve(upgrade_base.BASE_COMMIT)
    upgrade_base.extract(full, str(tmp_path), "schemas/sql")
    added, problems = upgrade_base.check_migrations(str(tmp_path / "schemas" / "sql"),
                                                    os.path.join(REPO, "schemas", "sql"))
    assert problems == []
    # every migration of the tree is N's or one it adds, in order after N's
    have = upgrade_base.migrations(str(tmp_path / "schemas" / "sql"))
    assert upgrade_base.migrations(os.path.join(REPO, "schemas", "sql")) == have + added
    assert "0009_consumer_positions.sql" in have


@pytest.mark.parametrize("sql,rules", [
    ("ALTER TABLE nifi_ops.load_run ADD COLUMN note text;", []),
    ("ALTER TABLE nifi_ops.load_run ADD COLUMN n int NOT NULL DEFAULT 0;", []),
    ("CREATE TABLE nifi_ops.t (a int); GRANT SELECT ON nifi_ops.t TO ll_operator;", []),
    ("ALTER TABLE nifi_ops.load_run ALTER COLUMN note SET DEFAULT '';", []),
    ("-- DROP TABLE nifi_ops.load_run; in a comment only\nSELECT 1;", []),
    ("ALTER TABLE nifi_ops.load_run DROP COLUMN note;", ["DROP COLUMN"]),
    ("DROP TABLE IF EXISTS nifi_ops.old;", ["DROP TABLE"]),
    ("alter table nifi_ops.load_run\n  rename column note to remark;", ["RENAME"]),
    ("ALTER TABLE nifi_ops.load_run ALTER COLUMN note TYPE varchar(10);", ["ALTER COLUMN ... TYPE"]),
    ("ALTER TABLE nifi_ops.load_run ALTER COLUMN note SET NOT NULL;", ["SET NOT NULL"]),
    ("SELECT 1; REVOKE INSERT ON nifi_ops.load_run FROM ll_claimer;", ["REVOKE"]),
])
def test_contract_statements(sql, rules):
    assert [r for r, _ in upgrade_base.contract_statements(sql)] == rules


def test_check_migrations_flags_edits_removals_and_contracts(tmp_path):
    old, new = tmp_path / "n", tmp_path / "n1"
    old.mkdir()
    new.mkdir()
    for d in (old, new):
        (d / "0001_a.sql").write_text("CREATE TABLE a (x int);\n")
        (d / "0002_b.sql").write_text("CREATE TABLE b (x int);\n")
    (old / "0003_c.sql").write_text("CREATE TABLE c (x int);\n")
    (new / "0002_b.sql").write_text("CREATE TABLE b (x bigint);\n")
    (new / "0004_d.sql").write_text("ALTER TABLE a ADD COLUMN y int;\n")
    (new / "0005_e.sql").write_text("ALTER TABLE a DROP COLUMN x;\n")
    added, problems = upgrade_base.check_migrations(str(old), str(new))
    assert added == ["0004_d.sql", "0005_e.sql"]
    assert len(problems) == 3
    assert problems[0].startswith("0002_b.sql changed since release N")
    assert problems[1].startswith("0003_c.sql of release N is gone")
    assert problems[2].startswith("0005_e.sql is not expand-only (DROP COLUMN)")


def test_an_unknown_base_commit_is_refused_by_name():
    with pytest.raises(upgrade_base.BaseError, match="commit 0123456789abcdef is not in"):
        upgrade_base.resolve("0123456789abcdef", say=lambda m: None)
