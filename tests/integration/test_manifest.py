"""Run requests (docs/contract.md §5.1) and manifests (§5.2) on the real broker and database: every
manifest invariant family committing FAILED_MANIFEST with its exact violation strings and no
partition rows, replays, conflicts, an empty source, and a manifest read before its run request
(docs/contract.md K§6)."""
from conftest import new_run, one, rows
from llsim.probe import admit, answer, answers, ask, ask_many, log_size, post, post_many, replies_to, wait_log
from llsim.scenario import SCN


def run_row(db, run):
    db.execute("SELECT status, error_stage, error_code, error_message, completed_at IS NOT NULL, expected_partition_count,"
               " success_partition_count, extracted_count, source_count FROM nifi_ops.load_run WHERE run_id = %s",
               (run.run_id,))
    return db.fetchone()


def parts_of(run, **changes):
    """The reference partitions with per-partition changes: {"0003": {"lowerBound": ...}}."""
    out = []
    for p in run.parts:
        q = dict(p)
        q.update(changes.get(p["partitionId"], {}))
        out.append(q)
    return out


def null_partition(rows_, **over):
    p = {"partitionId": "NULL", "lowerBound": None, "upperBound": None, "upperInclusive": False,
         "isNullPartition": True, "expectedRowCount": rows_}
    p.update(over)
    return p


def invalid_manifests(run_for):
    """(name, run, manifest, violations) for every family of docs/contract.md §5.2 step 4."""
    cases = []

    def case(name, build, violations, **run_kw):
        r = run_for(**run_kw)
        cases.append((name, r, build(r), violations))

    case("duplicate id", lambda r: r.manifest(partitions=parts_of(r, **{"0001": {"partitionId": "0000"}})),
         ["DUPLICATE_PARTITION_ID"])
    case("count", lambda r: r.manifest(plannedPartitionCount=9), ["PARTITION_COUNT_MISMATCH planned=9 actual=8"])
    case("sum", lambda r: r.manifest(sourceCount=105001), ["EXPECTED_SUM_MISMATCH sum=105000 source=105001"])
    case("empty source", lambda r: r.manifest(), ["EMPTY_SOURCE_BLOCKED"],
         empty=tuple("%04d" % i for i in range(8)))
    case("null partitions",
         lambda r: r.manifest(sourceCount=105010, sourceNullSplitCount=10, plannedPartitionCount=10,
                              partitions=r.parts + [null_partition(5), null_partition(5, partitionId="0008")]),
         ["MULTIPLE_NULL_PARTITIONS", "NULL_COUNT_MISMATCH expected=5 source=10",
          "INVALID_NULL_PARTITION 0008", "NULL_COUNT_MISMATCH expected=5 source=10"])
    case("null partition with a bound",
         lambda r: r.manifest(sourceCount=105003, sourceNullSplitCount=3, plannedPartitionCount=9,
                              partitions=r.parts + [null_partition(3, lowerBound="0")]),
         ["INVALID_NULL_PARTITION NULL"])
    case("null count", lambda r: r.manifest(sourceCount=105007, sourceNullSplitCount=5, plannedPartitionCount=9,
                                            partitions=r.parts + [null_partition(7)]),
         ["NULL_COUNT_MISMATCH expected=7 source=5"])
    case("null rows without null partition",
         lambda r: r.manifest(sourceNullSplitCount=3), ["NULL_ROWS_WITHOUT_NULL_PARTITION"])
    case("invalid bounds",
         lambda r: r.manifest(partitions=parts_of(r, **{"0003": {"lowerBound": "60001", "upperBound": "45001"}})),
         # 0003 is excluded from the chain, which then has a gap 0002 -> 0004
         ["INVALID_BOUNDS 0003", "RANGE_GAP_OR_OVERLAP 0002->0004"])
    case("range partition named NULL",
         lambda r: r.manifest(partitions=parts_of(r, **{"0007": {"partitionId": "NULL"}})),
         # the chain now ends at 0006: not upper-inclusive, and its upper bound is not sourceMaxSplit
         ["INVALID_BOUNDS NULL", "UPPER_INCLUSIVE_INVALID 0006", "MAX_SPLIT_MISMATCH"])
    case("upper inclusive", lambda r: r.manifest(partitions=parts_of(r, **{"0007": {"upperInclusive": False},
                                                                           "0002": {"upperInclusive": True}})),
         ["UPPER_INCLUSIVE_INVALID 0002", "UPPER_INCLUSIVE_INVALID 0007"])
    case("gap and overlap", lambda r: r.manifest(partitions=parts_of(r, **{"0002": {"lowerBound": "30002"},
                                                                          "0005": {"lowerBound": "75000"}})),
         ["RANGE_GAP_OR_OVERLAP 0001->0002", "RANGE_GAP_OR_OVERLAP 0004->0005"])
    case("min/max split", lambda r: r.manifest(sourceMinSplit="0", sourceMaxSplit="120001"),
         ["MIN_SPLIT_MISMATCH", "MAX_SPLIT_MISMATCH"])
    case("all at once",
         lambda r: r.manifest(plannedPartitionCount=7, sourceCount=1, sourceMaxSplit="1",
                              partitions=parts_of(r, **{"0001": {"upperBound": "30002"}})),
         ["PARTITION_COUNT_MISMATCH planned=7 actual=8", "EXPECTED_SUM_MISMATCH sum=105000 source=1",
          "RANGE_GAP_OR_OVERLAP 0001->0002", "MAX_SPLIT_MISMATCH"])
    return cases


def test_every_invariant_family_fails_the_manifest_with_its_violations(stack, flow, db):
    cases = invalid_manifests(new_run)
    sent = post_many(flow.nifi, [dict(logical="run-requests", record=r.run_request()) for _, r, _, _ in cases])
    assert all(a["outcome"] == "ACCEPTED" for a in answers(flow, sent))
    sent = post_many(flow.nifi, [dict(logical="manifests", record=m) for _, _, m, _ in cases])
    for (name, run, _, violations), d in zip(cases, answers(flow, sent)):
        joined = "; ".join(violations)
        assert (d["outcome"], d["code"], d["runStatus"]) == ("REJECTED", "MANIFEST_INVALID", "FAILED_MANIFEST"), (name, d)
        assert d["violations"] == violations, name
        assert d["message"] == joined, name
        assert (d["dispatchPartitions"], d["emptyPartitionCount"], d["validationScheduled"]) == ([], 0, False)
        assert run_row(db, run)[:5] == ("FAILED_MANIFEST", "MANIFEST", "MANIFEST_INVALID", joined, True), name
        assert one(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s", run.run_id) == 0, name
        assert one(db, "SELECT count(*) FROM nifi_ops.load_validation WHERE run_id = %s", run.run_id) == 0, name
        assert rows(db, "SELECT event_level, error_code, message FROM nifi_ops.load_event"
                    " WHERE run_id = %s AND event_name = 'MANIFEST_INVALID'", run.run_id) == [
            ("ERROR", "MANIFEST_INVALID", joined)], name

    # the same invalid manifest again gets the same refusal; another one is RUN_STATUS_MISMATCH
    name, run, manifest, violations = cases[1]
    same, other = ask_many(flow, "manifests", [manifest, run.manifest()])
    assert (same["outcome"], same["code"], same["violations"], same["runStatus"]) == (
        "REPLAY", "MANIFEST_INVALID", violations, "FAILED_MANIFEST")
    assert (other["outcome"], other["code"], other["runStatus"], other["details"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", "FAILED_MANIFEST", {"runStatus": "FAILED_MANIFEST"})
    assert one(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s", run.run_id) == 0
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'MANIFEST_INVALID'",
               run.run_id) == 1


def test_accepted_manifest_then_replay_and_conflicts(stack, flow, db):
    run = new_run()
    steps = admit(flow, run)
    d = steps["manifest"]
    assert (d["outcome"], d["code"], d["runStatus"], d["emptyPartitionCount"], d["validationScheduled"]) == (
        "ACCEPTED", None, "EXTRACTING", 1, False)
    assert d["dispatchPartitions"] == [p for p in run.parts if p["expectedRowCount"] > 0]
    assert run_row(db, run) == ("EXTRACTING", None, None, None, False, 8, 1, 0, 105000)
    assert rows(db, "SELECT partition_id, status, lower_bound::text, upper_bound::text, upper_inclusive,"
                " expected_row_count, actual_row_count FROM nifi_ops.load_partition WHERE run_id = %s"
                " ORDER BY partition_id", run.run_id) == [
        (p["partitionId"], "SUCCESS" if p["expectedRowCount"] == 0 else "PENDING", p["lowerBound"], p["upperBound"],
         p["upperInclusive"], p["expectedRowCount"], 0 if p["expectedRowCount"] == 0 else None) for p in run.parts]
    assert rows(db, "SELECT metric_name, actual_value, result, query_version FROM nifi_ops.load_validation"
                " WHERE run_id = %s AND stage = 'SOURCE' ORDER BY metric_name", run.run_id) == [
        ("AMOUNT_SUM", "52500000.00", "PASS", "v1"), ("MAX_TS", "2026-09-28T23:59:59", "PASS", "v1"),
        ("MIN_TS", "2026-09-28T00:00:00", "PASS", "v1"), ("SOURCE_COUNT", "105000", "PASS", "v1")]
    assert one(db, "SELECT snapshot_scn::text FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == SCN

    # replay: the ledger's partitions (ordered by id), also when the request lists them in another
    # order or with other bounds; a different id set or source count is RUN_STATUS_MISMATCH
    reordered = run.manifest(partitions=list(reversed(run.parts)))
    other_ids = run.manifest(partitions=parts_of(run, **{"0007": {"partitionId": "0008"}}))
    other_count = run.manifest(sourceCount=105001)
    out = ask_many(flow, "manifests", [run.manifest(), reordered, other_ids, other_count])
    for r in out[:2]:
        assert (r["outcome"], r["code"], r["runStatus"], r["emptyPartitionCount"], r["validationScheduled"]) == (
            "REPLAY", None, "EXTRACTING", 1, False), r
        assert r["dispatchPartitions"] == [p for p in run.parts if p["expectedRowCount"] > 0]
    for r in out[2:]:
        assert (r["outcome"], r["code"], r["runStatus"], r["details"]) == (
            "REJECTED", "RUN_STATUS_MISMATCH", "EXTRACTING", {"runStatus": "EXTRACTING"}), r
        assert (r["dispatchPartitions"], r["violations"]) == ([], [])
    assert one(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s", run.run_id) == 8
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'MANIFEST_CREATED'",
               run.run_id) == 1


def test_manifest_read_before_its_run_request_is_deferred_then_applied(stack, flow, db):
    run = new_run()
    since = log_size(stack, "registrar-0")
    manifest = post(flow.nifi, "manifests", run.manifest())
    wait_log(stack, "registrar-0", "message_deferred", since=since,
             pred=lambda r: r.get("offset") == manifest.offset and r.get("kafkaPartition") == manifest.partition)
    flow.r["manifest-decisions"].drain(1.0)
    assert replies_to(flow, manifest) == []
    assert ask(flow, "run-requests", run.run_request())["outcome"] == "ACCEPTED"
    d = answer(flow, manifest)
    assert (d["outcome"], d["runStatus"], d["emptyPartitionCount"]) == ("ACCEPTED", "EXTRACTING", 1), d
    assert run_row(db, run)[0] == "EXTRACTING"
    assert one(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s", run.run_id) == 8


def test_all_empty_partitions_with_allow_empty_source_complete_at_once(stack, flow, db):
    run = new_run(empty=tuple("%04d" % i for i in range(8)), allow_empty_source=True)
    assert ask(flow, "run-requests", run.run_request())["outcome"] == "ACCEPTED"
    assert one(db, "SELECT parameters->>'allowEmptySource' FROM nifi_ops.load_run WHERE run_id = %s",
               run.run_id) == "true"
    d = ask(flow, "manifests", run.manifest())
    assert (d["outcome"], d["code"], d["runStatus"], d["dispatchPartitions"], d["emptyPartitionCount"],
            d["validationScheduled"]) == ("ACCEPTED", None, "EXTRACTED_VALIDATED", [], 8, True), d
    assert run_row(db, run)[:1] + run_row(db, run)[5:] == ("EXTRACTED_VALIDATED", 8, 8, 0, 0)
    assert one(db, "SELECT extract_completed_at IS NOT NULL FROM nifi_ops.load_run WHERE run_id = %s", run.run_id)
    assert rows(db, "SELECT DISTINCT status, actual_row_count, file_count FROM nifi_ops.load_partition"
                " WHERE run_id = %s", run.run_id) == [("SUCCESS", 0, 0)]
    dispatches = rows(db, "SELECT dispatch_id::text, dispatch_type, partition_id FROM nifi_ops.load_dispatch"
                      " WHERE run_id = %s", run.run_id)
    assert [(t, p) for _, t, p in dispatches] == [("VALIDATE_RUN", None)]
    assert rows(db, "SELECT row_count FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'EXTRACT_VALIDATED'",
                run.run_id) == [(0,)]
    cmds = flow.validate_commands(run)
    assert cmds[0]["dispatchId"] == dispatches[0][0] and cmds[0]["dispatchType"] == "VALIDATE_RUN"
    # a replay of the manifest schedules nothing more
    again = ask(flow, "manifests", run.manifest())
    assert (again["outcome"], again["runStatus"], again["validationScheduled"], again["emptyPartitionCount"]) == (
        "REPLAY", "EXTRACTED_VALIDATED", False, 8)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == 1
    flow.r["validate-run-commands"].drain(2.0)
    assert len([r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]) == 1


def test_run_requests_duplicate_active_run_replay_and_invalid_root(stack, flow, db):
    first = new_run()
    second = new_run(business_key=first.business_key)
    bad_root = new_run()
    conflict = new_run()
    # the first one alone: requests of other run ids (other keys) may be applied in any order
    a = ask(flow, "run-requests", first.run_request())
    dup, again, root, c = ask_many(flow, "run-requests", [
        second.run_request(), first.run_request(), bad_root.run_request(hdfsRoot="/data/../stage"),
        conflict.run_request()])
    assert (a["outcome"], a["code"], a["runStatus"], a["hdfsRunPath"], a["stageTable"]) == (
        "ACCEPTED", None, "CREATED", first.hdfs_run_path, "stg_insp_dtl_" + first.run_id.replace("-", ""))
    assert (a["jobKey"], a["businessKey"]) == (first.job, first.business_key)
    assert (dup["outcome"], dup["code"], dup["runStatus"], dup["hdfsRunPath"], dup["stageTable"]) == (
        "REJECTED", "DUPLICATE_ACTIVE_RUN", None, None, None), dup
    assert dup["details"] == {"jobKey": first.job, "businessKey": first.business_key}
    assert {k: again[k] for k in ("outcome", "code", "runStatus", "hdfsRunPath", "stageTable")} == dict(
        outcome="REPLAY", code=None, runStatus="CREATED", hdfsRunPath=a["hdfsRunPath"], stageTable=a["stageTable"])
    assert (root["outcome"], root["code"], root["runStatus"]) == ("REJECTED", "INVALID_HDFS_ROOT", None), root
    assert c["outcome"] == "ACCEPTED"
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id IN (%s, %s)", second.run_id, bad_root.run_id) == 0
    assert rows(db, "SELECT run_id::text, code FROM nifi_ops.load_run_rejection WHERE run_id IN (%s, %s)"
                " ORDER BY code", second.run_id, bad_root.run_id) == [
        (second.run_id, "DUPLICATE_ACTIVE_RUN"), (bad_root.run_id, "INVALID_HDFS_ROOT")]
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'RUN_STARTED'",
               first.run_id) == 1
    db.execute("SELECT status, job_key, business_key, hdfs_run_path, stage_table_name, parameters::text"
               " FROM nifi_ops.load_run WHERE run_id = %s", (first.run_id,))
    assert db.fetchone() == ("CREATED", first.job, first.business_key, first.hdfs_run_path, a["stageTable"],
                             '{"flow": "PG-10", "allowEmptySource": false}')

    # the first run ends; a replay of the refused request stays refused (it never becomes a run),
    # and a run id reused for another business key is RUN_ID_CONFLICT
    assert ask(flow, "manifests", first.manifest(plannedPartitionCount=1))["code"] == "MANIFEST_INVALID"
    out = ask_many(flow, "run-requests", [second.run_request(), bad_root.run_request(hdfsRoot="/data/../stage"),
                                          conflict.run_request(businessKey="2026-09-29.other")])
    replay_dup, replay_root, clash = out
    assert (replay_dup["outcome"], replay_dup["code"], replay_dup["runStatus"], replay_dup["details"]) == (
        "REPLAY", "DUPLICATE_ACTIVE_RUN", None, {"jobKey": first.job, "businessKey": first.business_key})
    assert (replay_root["outcome"], replay_root["code"]) == ("REPLAY", "INVALID_HDFS_ROOT")
    assert (clash["outcome"], clash["code"], clash["runStatus"]) == ("REJECTED", "RUN_ID_CONFLICT", "CREATED")
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", second.run_id) == 0
    assert one(db, "SELECT business_key FROM nifi_ops.load_run WHERE run_id = %s", conflict.run_id) == conflict.business_key
    # events of a refused run answer RUN_NOT_FOUND at once
    m = ask(flow, "manifests", second.manifest())
    assert (m["outcome"], m["code"], m["runStatus"]) == ("REJECTED", "RUN_NOT_FOUND", None)
