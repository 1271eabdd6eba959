"""The reference scenario end to end on the real broker and database (docs/contract.md K§8)."""
from conftest import new_run, one


def test_reference_scenario_reaches_extracted_validated_with_one_command(stack, flow, db):
    run = new_run()
    steps = flow.to_extracted(run)

    assert steps["run"]["outcome"] == "ACCEPTED" and steps["run"]["runStatus"] == "CREATED"
    assert steps["run"]["hdfsRunPath"] == run.hdfs_run_path
    assert steps["manifest"]["runStatus"] == "EXTRACTING"
    assert steps["manifest"]["emptyPartitionCount"] == 1
    assert [p["partitionId"] for p in steps["manifest"]["dispatchPartitions"]] == run.nonempty()
    granted = [c for c in steps["claims"] if c["claimed"]]
    assert len(granted) == 7
    assert all(c["snapshotScn"] == "48151623420000000042" and c["hdfsRunPath"] == run.hdfs_run_path for c in granted)
    assert sum(1 for o in steps["chunks"] if o["validationScheduled"]) == 1

    assert one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "EXTRACTED_VALIDATED"
    assert one(db, "SELECT extracted_count FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == 105000
    db.execute("SELECT partition_id, status, actual_row_count, file_count FROM nifi_ops.load_partition"
               " WHERE run_id = %s ORDER BY partition_id", (run.run_id,))
    parts = db.fetchall()
    assert [(p[0], p[1], p[2], p[3]) for p in parts] == [
        ("%04d" % i, "SUCCESS", 0 if i == 5 else 15000, 0 if i == 5 else 3) for i in range(8)]
    assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run.run_id) == 21
    assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == 1

    flow.r["validate-run-commands"].drain(3)
    cmds = [r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]
    assert len(cmds) == 1
    assert cmds[0]["headers"]["jobKey"] == b"ORACLE_INSP_DTL_DAILY"
    assert cmds[0]["value"]["dispatchId"] == one(
        db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)
