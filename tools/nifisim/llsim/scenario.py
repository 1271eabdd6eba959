"""The reference scenario of kafka-edition.md section 8, and the NiFi events that drive it.

Job ORACLE_INSP_DTL_DAILY, business key 2026-09-28, 105,000 source rows, split range 1..120,000
cut into 8 partitions of 15,000 ids, one of them empty (so 7 x 15,000 rows), 5,000 rows a
Parquet chunk (3 chunks per non-empty partition), source metrics AMOUNT_SUM, MIN_TS, MAX_TS.
"""
import uuid

JOB = "ORACLE_INSP_DTL_DAILY"
BUSINESS_KEY = "2026-09-28"
SOURCE_COUNT = 105000
PARTITIONS = 8
IDS_PER_PARTITION = 15000
EMPTY_PARTITION = "0005"
ROWS_PER_CHUNK = 5000
SCN = "48151623420000000042"
HDFS_ROOT = "/data/stage"


class Run:
    """One run of a load as NiFi's flows would report it."""

    def __init__(self, job=JOB, business_key=BUSINESS_KEY, run_id=None, empty=(EMPTY_PARTITION,),
                 partitions=PARTITIONS, allow_empty_source=False):
        self.run_id = run_id or str(uuid.uuid4())
        self.job = job
        self.business_key = business_key
        self.allow_empty_source = allow_empty_source
        self.hdfs_run_path = "%s/%s/run_id=%s" % (HDFS_ROOT, job, self.run_id)
        self.parts = []
        for i in range(partitions):
            pid = "%04d" % i
            lo = 1 + i * IDS_PER_PARTITION
            last = i == partitions - 1
            hi = partitions * IDS_PER_PARTITION if last else lo + IDS_PER_PARTITION
            rows = 0 if pid in empty else IDS_PER_PARTITION
            self.parts.append({"partitionId": pid, "lowerBound": str(lo), "upperBound": str(hi),
                               "upperInclusive": last, "isNullPartition": False, "expectedRowCount": rows})
        self.tokens = {}

    @property
    def source_count(self):
        return sum(p["expectedRowCount"] for p in self.parts)

    def nonempty(self):
        return [p["partitionId"] for p in self.parts if p["expectedRowCount"] > 0]

    def run_request(self, **over):
        r = {"runId": self.run_id, "jobKey": self.job, "businessKey": self.business_key,
             "hdfsRoot": HDFS_ROOT, "stageTablePrefix": "stg_insp_dtl_",
             "allowEmptySource": self.allow_empty_source, "parameters": {"flow": "PG-10"}}
        r.update(over)
        return r

    def manifest(self, **over):
        m = {"runId": self.run_id, "snapshotScn": SCN, "sourceCount": self.source_count,
             "sourceNullSplitCount": 0, "sourceMinSplit": self.parts[0]["lowerBound"],
             "sourceMaxSplit": self.parts[-1]["upperBound"], "plannedPartitionCount": len(self.parts),
             "sourceMetrics": {"AMOUNT_SUM": "52500000.00", "MIN_TS": "2026-09-28T00:00:00",
                               "MAX_TS": "2026-09-28T23:59:59"},
             "sourceMetricsVersion": "v1", "partitions": self.parts}
        m.update(over)
        return m

    def claim(self, pid, token=None, worker="nifi-node-1"):
        token = token or self.tokens.get(pid) or str(uuid.uuid4())
        self.tokens.setdefault(pid, token)
        return {"runId": self.run_id, "partitionId": pid, "claimToken": token, "workerNode": worker}

    def expected(self, pid):
        return next(p["expectedRowCount"] for p in self.parts if p["partitionId"] == pid)

    def chunks(self, pid, token=None, rows_per_chunk=ROWS_PER_CHUNK):
        """The chunk reports of one partition's extraction (records sum to the expected rows)."""
        token = token or self.tokens[pid]
        rows = self.expected(pid)
        n = max(1, -(-rows // rows_per_chunk))
        out = []
        for i in range(n):
            rec = min(rows_per_chunk, rows - i * rows_per_chunk)
            out.append(self.chunk(pid, i, n, rec, token))
        return out

    def chunk(self, pid, index, count, records, token=None, path=None, byte_count=None):
        token = token or self.tokens[pid]
        return {"runId": self.run_id, "partitionId": pid, "claimToken": token, "chunkIndex": index,
                "chunkCount": count, "fragmentIdentifier": "frag-%s-%s" % (pid, token[:8]),
                "hdfsPath": path or "%s/part-%s/chunk-%05d.parquet" % (self.hdfs_run_path, pid, index),
                "recordCount": records, "byteCount": byte_count if byte_count is not None else records * 96}

    def partition_failure(self, pid, code="ORA-00028", error_class="ORACLE", message="session killed", token=None):
        return {"runId": self.run_id, "partitionId": pid, "claimToken": token or self.tokens[pid],
                "errorStage": "EXTRACT", "errorClass": error_class, "errorCode": code, "message": message,
                "attempt": 1}
