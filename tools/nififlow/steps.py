"""The process groups of the loadledger flow, one per step of the contract (PG-00 ... PG-90), the
empty SITE groups, and the connections between them."""
from builder import CONSUME, CONVERT, DEDUP, EVAL, GENERATE, LOG, NOTIFY, SPLIT, UPDATE, BuilderBase
from contract import COMMAND_HEADERS, COMMAND_TOPICS, DIRECT, REPLY_OF, REPLY_TOPICS, SIGNAL_FIELDS, WAITED, reply_fields
from el import boolean, num, obj, opt_num, opt_s, s, s_or
from model import uid


class Builder(BuilderBase):
    """The whole flow of one variant: build() returns the RegisteredFlowSnapshot as a dict."""

    def pg00_replies(self):
        g = self.root.child("PG-00 Replies", pos=(0, 0), comments=(
            "Every reply of loadledger, read once for the cluster: the waiting request is signalled (Wait/Notify), "
            "or the reply goes to the group that acts on it."))
        g.label("PG-00: one ConsumeKafka for the %d reply topics (one consumer group for the cluster: any node may "
                "read any reply), one FlowFile per reply, its fields as ll.reply.* attributes, then a Notify whose "
                "signal is <topic>|runId|partitionId|claimToken|chunkIndex|publishToken|dispatchId|stage of the "
                "reply: the Wait of the request that asked computes the same from its own attributes."
                % len(REPLY_TOPICS))
        paths = {"ll.reply." + f: "$." + f for f in reply_fields()}
        ev = self.consumer(g, "replies", REPLY_TOPICS, "reply", "Reply fields to attributes", paths,
                           comments="Every scalar field of every reply schema (a field a reply lacks is an empty "
                                    "attribute); maps and arrays of strings as JSON text.")
        routes = {"waited": "${kafka.topic:in(%s)}" % ",".join("'%s'" % self.topic(t) for t in WAITED)}
        for t in DIRECT:
            routes[t] = "${kafka.topic:equals('%s')}" % self.topic(t)
        rt = self.route(g, "Route by reply topic", routes)
        g.connect(ev, rt, ["matched"])
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        notify = g.processor("Signal the waiting request", NOTIFY, {
            "release-signal-id": "${kafka.topic}|" + "|".join("${ll.reply.%s}" % f for f in SIGNAL_FIELDS),
            "signal-counter-name": "default", "signal-counter-delta": "1", "signal-buffer-count": "1",
            "distributed-cache-service": self.cache, "attribute-cache-regex": r"ll\.reply\..*"},
            auto=["success"], retry=["failure"], col=1)
        g.connect(rt, notify, ["waited"])
        g.connect(notify, self.alerts(g), ["failure"])
        for t, port in DIRECT.items():
            g.connect(rt, g.output(port), [t])
        g.connect(rt, self.alerts(g), ["unmatched"])
        return g

    def consumer(self, g, what, topics, one, eval_name, paths, headers=None, comments=""):
        """ConsumeKafka (group <prefix>nifi.<what>, earliest, committing, records through the reply
        reader and the JSON writer) -> SplitJson (one record per FlowFile) -> EvaluateJsonPath (paths
        into attributes). Returns the EvaluateJsonPath; its matched relationship is the caller's."""
        props = {"Kafka Connection Service": self.kafka, "Group ID": self.P["prefix"] + "nifi." + what,
                 "Topic Format": "names", "Topics": ",".join(self.topic(t) for t in topics),
                 "auto.offset.reset": "earliest", "Commit Offsets": "true", "Processing Strategy": "RECORD",
                 "Record Reader": self.avro_reader, "Record Writer": self.json_writer, "Output Strategy": "USE_VALUE"}
        doc = "Auto Offset Reset earliest, Commit Offsets true, read_committed (the connection service)."
        if headers:
            props["Header Name Pattern"] = "|".join(headers)
            doc += " The headers %s become attributes (schemas/README.md, 'Commands')." % ", ".join(headers)
        consume = g.processor("Consume " + what, CONSUME, props, comments=doc)
        split = g.processor("One %s per FlowFile" % one, SPLIT, {"JsonPath Expression": "$.*"}, auto=["original"])
        g.connect(consume, split, ["success"])
        g.connect(consume, self.alerts(g), ["parse failure"])
        ev = g.processor(eval_name, EVAL, dict({
            "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
            "Null Value Representation": "empty string"}, **paths), comments=comments)
        g.connect(split, ev, ["split"])
        g.connect(split, self.alerts(g), ["failure"])
        return ev

    def pg05_commands(self):
        g = self.root.child("PG-05 Commands", pos=(0, 500), comments=(
            "The dispatcher's validate-run and reissue-partition commands."))
        g.label("PG-05: a command can arrive twice with the same dispatchId (README): DetectDuplicate drops the "
                "copies seen within #{dispatch.dedup.age}; the completion service's CAS is the guarantee that only "
                "one ValidationStart wins (validation-start-decisions, PG-40).")
        ev = self.consumer(g, "commands", COMMAND_TOPICS, "command", "Command fields to attributes", {
            "ll.cmd." + f: "$." + f for f in ("dispatchId", "dispatchType", "runId", "jobKey", "partitionId", "attempt")},
            headers=COMMAND_HEADERS)
        rt = self.route(g, "Route by dispatch type", {
            "validate": "${ll.cmd.dispatchType:equals('VALIDATE_RUN')}",
            "reissue": "${ll.cmd.dispatchType:equals('REISSUE_PARTITION')}"})
        g.connect(ev, rt, ["matched"])
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        dedup = g.processor("Drop copies of a dispatch", DEDUP, {
            "Cache Entry Identifier": "${ll.cmd.dispatchId}", "FlowFile Description": "${ll.cmd.runId}",
            "Age Off Duration": self.P["dedup_age"], "Distributed Cache Service": self.cache},
            auto=["duplicate"], retry=["failure"])
        g.connect(rt, dedup, ["validate"])
        g.connect(dedup, self.alerts(g), ["failure"])
        first, pub = self.publisher(g, "validation-starts", template=obj([
            ("runId", s("ll.run.id")), ("dispatchId", s("ll.dispatch.id")), ("node", s("ll.node"))]),
            attrs={"ll.run.id": "${ll.cmd.runId}", "ll.dispatch.id": "${ll.cmd.dispatchId}",
                   "ll.node": "${hostname(true)}/${uuid}"},
            comments="The ACK of the command; its decision comes back to PG-40 through PG-00.")
        g.connect(dedup, first, ["non-duplicate"])
        pub["autoTerminatedRelationships"] = ["success"]
        reissue = g.processor("Reissued partition", UPDATE, {
            "ll.run.id": "${ll.cmd.runId}", "ll.partition.id": "${ll.cmd.partitionId}"}, col=1,
            comments="The command carries the work order; PG-20 claims the partition again with a new token.")
        g.connect(rt, reissue, ["reissue"])
        g.connect(reissue, g.output("reissued partitions"), ["success"])
        return g

    def pg10_coordinator(self):
        g = self.root.child("PG-10 Run coordinator", pos=(700, 0), comments="Run request and manifest.")
        g.label("PG-10: a FlowFile with ll.job.key and ll.business.key (optional: ll.hdfs.root, "
                "ll.stage.table.prefix, ll.allow.empty.source, ll.run.id to resend a request) starts a run. "
                "The run request is sent, its decision awaited; the SITE group plans the manifest from Oracle; the "
                "manifest is sent and, once registered, its partitions go to PG-20.")
        start = g.input("start run", "ll.job.key, ll.business.key (and the optional attributes of the label).")
        example = g.processor("Start a run (example)", GENERATE, {
            "File Size": "0B", "ll.job.key": "ORACLE_INSP_DTL_DAILY",
            "ll.business.key": "${now():minus(86400000):format('yyyy-MM-dd')}"},
            state="DISABLED", schedule=("CRON_DRIVEN", "0 0 2 * * ?"), all_nodes=False,
            comments="Disabled: an example trigger (yesterday's load at 02:00 on the primary node).")
        P = self.P
        first, pub = self.publisher(g, "run-requests", template=obj([
            ("runId", s("ll.run.id")), ("jobKey", s("ll.job.key")), ("businessKey", s("ll.business.key")),
            ("hdfsRoot", s("ll.hdfs.root")), ("stageTablePrefix", s("ll.stage.table.prefix")),
            ("allowEmptySource", boolean("ll.allow.empty.source")),
            ("parameters", obj([("flow", '"PG-10"'), ("node", '"${hostname(true):escapeJson()}"')])),
            ("requestedAt", '"${now():format("yyyy-MM-dd\'T\'HH:mm:ss.SSS\'Z\'", "GMT")}"')]),
            attrs={"ll.run.id": "${ll.run.id:isEmpty():ifElse(${UUID()}, ${ll.run.id})}",
                   "ll.hdfs.root": "${ll.hdfs.root:replaceEmpty('%s')}" % P["hdfs_root"],
                   "ll.stage.table.prefix": "${ll.stage.table.prefix:replaceEmpty('%s')}" % P["table_prefix"],
                   "ll.allow.empty.source": "${ll.allow.empty.source:replaceEmpty('false')}"},
            comments="The run id is minted here, once (docs/contract.md §5.1).")
        g.connect(start, first)
        g.connect(example, first, ["success"])
        w = self.wait(g, "run-decisions", "Wait for the run decision", runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        rt = self.route(g, "Run admitted?", {"admitted": "${ll.reply.outcome:in('ACCEPTED','REPLAY')}"},
                        comments="REJECTED (DUPLICATE_ACTIVE_RUN, RUN_ID_CONFLICT, ...) goes to the alerts.")
        g.connect(w, rt, ["success"])
        g.connect(rt, g.output("plan manifest", "To the SITE group: ll.run.id, ll.job.key, ll.business.key, "
                                                "ll.reply.hdfsRunPath, ll.reply.stageTable."), ["admitted"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        manifest = g.input("manifest", "From the SITE group: the Manifest record as JSON (schemas/avro/Manifest.avsc) "
                                       "with the FlowFile's attributes kept.")
        first, pub = self.publisher(g, "manifests", col=1, comments="The content is the Manifest already.")
        g.connect(manifest, first)
        w = self.wait(g, "manifest-decisions", "Wait for the manifest decision", col=1, runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        rt = self.route(g, "Manifest registered?", {"registered": "${ll.reply.outcome:in('ACCEPTED','REPLAY')}"},
                        col=1, comments="MANIFEST_INVALID: the ledger failed the run already (FAILED_MANIFEST).")
        g.connect(w, rt, ["success"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        path, src = "$.partitions", rt
        if self.variant == "embedded":  # the content became the Avro container it published
            back = g.processor("Manifest as JSON again", CONVERT, {
                "Record Reader": self.avro_reader, "Record Writer": self.json_writer,
                "Include Zero Record FlowFiles": "false"}, col=1)
            g.connect(rt, back, ["registered"])
            g.connect(back, self.alerts(g), ["failure"])
            path, src = "$[0].partitions", back
        split = g.processor("One FlowFile per partition", SPLIT, {"JsonPath Expression": path},
                            auto=["original"], col=1,
                            comments="The partitions of the manifest it sent; PG-20 claims those with rows.")
        g.connect(src, split, ["registered"] if src is rt else ["success"])
        g.connect(split, self.alerts(g), ["failure"])
        g.connect(split, g.output("partitions"), ["split"])
        failed = g.input("manifest failed", "From the SITE group: the manifest could not be planned "
                                            "(ll.error.code, ll.error.message).")
        self.fail_run(g, failed, [], "CREATED", "FAILED_MANIFEST", "MANIFEST", "MANIFEST_PLANNING_FAILED", col=2)
        return g

    def pg20_worker(self):
        g = self.root.child("PG-20 Partition worker", pos=(700, 500),
                            comments="Claim, work order, chunk reports, failure report.")
        g.label("PG-20: a partition is claimed with a fresh claimToken minted on this node; only a granted "
                "ClaimDecision (claimed = true, the whole work order in ll.reply.*) goes on to the SITE extraction. "
                "Chunk reports and the failure report reuse the token (docs/contract.md §5.3-5.5).")
        parts = g.input("partitions", "A partition as JSON (from the manifest or a reissue command), ll.run.id.")
        ev = g.processor("Partition fields", EVAL, {
            "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
            "Null Value Representation": "empty string", "ll.partition.id": "$.partitionId",
            "ll.expected.rows": "$.expectedRowCount"})
        g.connect(parts, ev)
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        rt = self.route(g, "Has rows?", {"rows": "${ll.expected.rows:gt(0)}"},
                        comments="An empty partition was SUCCESS at registration: nothing to claim.")
        g.connect(ev, rt, ["matched"])
        rt["autoTerminatedRelationships"] = ["unmatched"]
        first, pub = self.publisher(g, "partition-claims", template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("workerNode", s("ll.worker.node"))]),
            attrs={"ll.claim.token": "${UUID()}", "ll.worker.node": "${hostname(true)}"},
            comments="A new token per claim; a retry of this FlowFile keeps it.")
        g.connect(rt, first, ["rows"], load_balance="ROUND_ROBIN")
        w = self.wait(g, "claim-decisions", "Wait for the claim decision", runId="${ll.run.id}",
                      partitionId="${ll.partition.id}", claimToken="${ll.claim.token}")
        g.connect(pub, w, ["success"])
        claimed = self.route(g, "Claimed?", {"claimed": "${ll.reply.claimed:equals('true')}"},
                             comments="Not claimed is a normal race (docs/contract.md §5.3): never query Oracle then.")
        g.connect(w, claimed, ["success"])
        g.connect(claimed, g.output("extract partition", "To the SITE group: the work order in ll.reply.* "
                                                         "(snapshotScn, lowerBound, upperBound, upperInclusive, "
                                                         "isNullPartition, expectedRowCount, hdfsRunPath) and "
                                                         "ll.run.id, ll.partition.id, ll.claim.token."), ["claimed"])
        log = g.processor("Not claimed", LOG, {"Log Level": "info", "Log prefix": "loadledger: not claimed "},
                          auto=["success"])
        g.connect(claimed, log, ["unmatched"])
        chunk = g.input("chunk written", "From the SITE group, one per Parquet file: ll.run.id, ll.partition.id, "
                                         "ll.claim.token, ll.chunk.index (0-based), ll.chunk.count, ll.fragment.id, "
                                         "ll.hdfs.path, ll.record.count, ll.byte.count.")
        first, pub = self.publisher(g, "chunks", col=1, template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("chunkIndex", num("ll.chunk.index")), ("chunkCount", num("ll.chunk.count")),
            ("fragmentIdentifier", opt_s("ll.fragment.id")), ("hdfsPath", s("ll.hdfs.path")),
            ("recordCount", num("ll.record.count")), ("byteCount", opt_num("ll.byte.count"))]),
            comments="Its outcome comes back through PG-00 (chunk outcomes).")
        g.connect(chunk, first)
        pub["autoTerminatedRelationships"] = ["success"]
        failed = g.input("extraction failed", "From the SITE group: ll.run.id, ll.partition.id, ll.claim.token, "
                                              "ll.error.stage, ll.error.class, ll.error.code, ll.error.message.")
        first, pub = self.publisher(g, "partition-failures", col=1, template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("errorStage", s_or("ll.error.stage", "EXTRACT")), ("errorClass", s_or("ll.error.class", "UNKNOWN")),
            ("errorCode", s_or("ll.error.code", "UNKNOWN")), ("message", s_or("ll.error.message", "failed")),
            ("attempt", opt_num("ll.reply.attempt"))]))
        g.connect(failed, first)
        pub["autoTerminatedRelationships"] = ["success"]
        for port, what in (("chunk outcomes", "chunk"), ("partition failure outcomes", "failure report")):
            src = g.input(port, "From PG-00.")
            r = self.route(g, "Refused %s?" % what, {"refused": "${ll.reply.outcome:equals('REJECTED')}"}, col=2,
                           comments="CLAIM_MISMATCH (a zombie after a reissue), CHUNK_CONFLICT, ... go to the alerts.")
            g.connect(src, r)
            g.connect(r, self.alerts(g), ["refused"])
            r["autoTerminatedRelationships"] = ["unmatched"]
        return g

    def pg40_staging(self):
        g = self.root.child("PG-40 Staging validation", pos=(1400, 0), comments="Validation start to STAGING_VALIDATED.")
        g.label("PG-40: only the winning ValidationStartDecision (started = true) goes on, carrying the run context. "
                "STAGING metrics, then stage-validated: the run is STAGING_VALIDATED and goes to PG-50.")
        src = g.input("validation start decisions", "From PG-00.")
        won = self.route(g, "Won the start?", {"started": "${ll.reply.started:equals('true')}"},
                         comments="A copy that lost the CAS answers started = false (docs/contract.md §5.7).")
        g.connect(src, won)
        won["autoTerminatedRelationships"] = ["unmatched"]
        ctx = g.processor("Run context", UPDATE, {
            "ll.run.id": "${ll.reply.runId}", "ll.dispatch.id": "${ll.reply.dispatchId}",
            "ll.job.key": "${ll.reply.jobKey}", "ll.business.key": "${ll.reply.businessKey}",
            "ll.snapshot.scn": "${ll.reply.snapshotScn}", "ll.hdfs.run.path": "${ll.reply.hdfsRunPath}",
            "ll.stage.table": "${ll.reply.stageTable}", "ll.source.count": "${ll.reply.sourceCount}",
            "ll.extracted.count": "${ll.reply.extractedCount}", "ll.source.metrics": "${ll.reply.sourceMetrics}"},
            comments="The context of the run, kept on this FlowFile through PG-40, PG-50 and PG-60.")
        g.connect(won, ctx, ["started"])
        g.connect(ctx, g.output("validate staging", "To the SITE group: ll.run.id and the ll.* run context."),
                  ["success"])
        ok, f = self.metrics_gate(g, "STAGING", "staging metrics", "stage-validations",
                                  obj([("runId", s("ll.run.id"))]), "Wait for the stage-validated outcome",
                                  "Staging validated?", {"validated": "${ll.reply.stageValidated:equals('true')}"},
                                  ("STAGE_VALIDATING", "FAILED_STAGE_VALIDATION", "PG-40", "STAGING_VALIDATION_FAILED"),
                                  col=1)
        g.connect(ok, g.output("staging validated", "To PG-50."), ["validated"])
        failed = g.input("staging validation failed", "From the SITE group: ll.error.code, ll.error.message.")
        g.connect(failed, f)
        return g

    def metrics_gate(self, g, stage, port, next_topic, next_template, next_wait, route_name, route, fail, col=0):
        """The metrics of a stage (docs/contract.md §5.8) from the SITE group's port, then, when none
        failed, the next request (stage-validated or success, §5.9-5.10). Returns the route after the
        next request's reply and the run failure that both refusals lead to."""
        metrics = g.input(port, "From the SITE group: a JSON array of Metric records "
                                "(schemas/avro/ValidationMetrics.avsc), the attributes kept.")
        first, pub = self.publisher(g, "validation-metrics", col=col, wrap=obj([
            ("runId", s("ll.run.id")), ("stage", '"%s"' % stage), ("queryVersion", '"%s"' % self.P["query_version"]),
            ("metrics", "$1")]))
        g.connect(metrics, first)
        w = self.wait(g, "validation-metrics-outcomes", "Wait for the %s metrics outcome" % stage, col=col,
                      runId="${ll.run.id}", stage=stage)
        g.connect(pub, w, ["success"])
        passed = self.route(g, "%s metrics passed?" % stage, {
            "passed": "${ll.reply.outcome:in('ACCEPTED','REPLAY'):and(${ll.reply.failCount:equals('0')})}"}, col=col)
        g.connect(w, passed, ["success"])
        first, pub = self.publisher(g, next_topic, col=col, template=next_template)
        g.connect(passed, first, ["passed"])
        w = self.wait(g, REPLY_OF[next_topic], next_wait, col=col, runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        ok = self.route(g, route_name, route, col=col)
        g.connect(w, ok, ["success"])
        f = self.fail_run(g, passed, ["unmatched"], *fail, col=col + 1)
        g.connect(ok, f, ["unmatched"])
        return ok, f

    def pg50_publish(self):
        g = self.root.child("PG-50 Publish", pos=(1400, 500), comments="Publish claim and result.")
        g.label("PG-50: only a claimed publishToken may run the INSERT OVERWRITE (docs/contract.md §5.13). The "
                "SITE group reports published, failed or unknown (any failure it cannot classify, §5.14).")
        src = g.input("staging validated", "From PG-40.")
        first, pub = self.publisher(g, "publish-claims", template=obj([
            ("runId", s("ll.run.id")), ("publishToken", s("ll.publish.token"))]),
            attrs={"ll.publish.token": "${UUID()}"})
        g.connect(src, first)
        w = self.wait(g, "publish-claim-decisions", "Wait for the publish claim decision", runId="${ll.run.id}",
                      publishToken="${ll.publish.token}")
        g.connect(pub, w, ["success"])
        claimed = self.route(g, "Publish claimed?", {"claimed": "${ll.reply.claimed:equals('true')}"},
                             comments="Not claimed: another token publishes (a second copy of this run's chain) "
                                      "or the run is no longer STAGING_VALIDATED.")
        g.connect(w, claimed, ["success"])
        g.connect(claimed, g.output("publish", "To the SITE group: ll.publish.token and the run context."),
                  ["claimed"])
        log = g.processor("Publish not claimed", LOG, {"Log Level": "info",
                                                       "Log prefix": "loadledger: publish not claimed "},
                          auto=["success"])
        g.connect(claimed, log, ["unmatched"])
        outcome = g.processor("Publish outcome", UPDATE, {
            "ll.publish.outcome": "${ll.publish.outcome:replaceEmpty('PUBLISH_UNKNOWN')}"}, col=1,
            comments="ll.publish.outcome from the port it came in by.")
        for port, value in (("published", "PUBLISHED"), ("publish failed", "FAILED_PUBLISH"),
                            ("publish outcome unknown", "PUBLISH_UNKNOWN")):
            p = g.input(port, "From the SITE group (ll.error.code, ll.error.message when not published).")
            set_ = g.processor("Outcome %s" % value, UPDATE, {"ll.publish.outcome": value}, col=2)
            g.connect(p, set_)
            g.connect(set_, outcome, ["success"])
        first, pub = self.publisher(g, "publish-results", col=1, template=obj([
            ("runId", s("ll.run.id")), ("publishToken", s("ll.publish.token")),
            ("outcome", s("ll.publish.outcome")), ("errorCode", opt_s("ll.error.code")),
            ("message", s_or("ll.error.message", ""))]))
        g.connect(outcome, first, ["success"])
        w = self.wait(g, "publish-result-outcomes", "Wait for the publish result outcome", col=1,
                      runId="${ll.run.id}", publishToken="${ll.publish.token}")
        g.connect(pub, w, ["success"])
        done = self.route(g, "Published?", {"published": "${ll.reply.runStatus:equals('PUBLISHED')}"}, col=1,
                          comments="FAILED_PUBLISH and PUBLISH_UNKNOWN (an operator resolves it: runbooks) "
                                   "go to the alerts.")
        g.connect(w, done, ["success"])
        g.connect(done, g.output("published", "To PG-60."), ["published"])
        g.connect(done, self.alerts(g), ["unmatched"])
        return g

    def pg60_target(self):
        g = self.root.child("PG-60 Target validation", pos=(2100, 0), comments="TARGET metrics and success.")
        g.label("PG-60: TARGET metrics, then the success request: the run is SUCCESS. ll.target.count, when the "
                "SITE group sets it, is the target count; else the ledger takes the TARGET_COUNT metric.")
        src = g.input("published", "From PG-50.")
        g.connect(src, g.output("validate target", "To the SITE group: the run context."))
        ok, f = self.metrics_gate(g, "TARGET", "target metrics", "run-successes",
                                  obj([("runId", s("ll.run.id")), ("targetCount", opt_num("ll.target.count"))]),
                                  "Wait for the success outcome", "Run SUCCESS?",
                                  {"success": "${ll.reply.success:equals('true')}"},
                                  ("PUBLISHED", "FAILED_TARGET_VALIDATION", "PG-60", "TARGET_VALIDATION_FAILED"))
        log = g.processor("Run SUCCESS", LOG, {"Log Level": "info", "Log prefix": "loadledger: SUCCESS "}, col=1)
        g.connect(ok, log, ["success"])
        g.connect(log, g.output("run succeeded", "The run is SUCCESS: to the SITE group that tells people."),
                  ["success"])
        failed = g.input("target validation failed", "From the SITE group: ll.error.code, ll.error.message.")
        g.connect(failed, f)
        return g

    def pg90_failures(self):
        g = self.root.child("PG-90 Failures and alerts", pos=(2100, 500), comments="Run failures and alerts.")
        g.label("PG-90: a run failure (one of the five allowed expected/fail pairs, docs/contract.md §5.6) is "
                "reported and its outcome logged; everything else that needs a person goes out of 'to operators'.")
        out = g.output("to operators", "Every alert, with its attributes: route it to mail, chat or tickets.")
        alog = g.processor("Alert", LOG, {"Log Level": "warn", "Log prefix": "loadledger: alert "}, col=1)
        g.connect(alog, out, ["success"])
        self.alert_sinks[g.path] = alog
        src = g.input("run failed", "ll.run.id, ll.fail.expected, ll.fail.status, ll.error.stage, ll.error.code, "
                                    "ll.error.message.")
        first, pub = self.publisher(g, "run-failures", template=obj([
            ("runId", s("ll.run.id")), ("expectedStatus", s("ll.fail.expected")), ("failStatus", s("ll.fail.status")),
            ("errorStage", s("ll.error.stage")), ("errorCode", s("ll.error.code")),
            ("message", s("ll.error.message"))]))
        g.connect(src, first)
        w = self.wait(g, "run-failure-outcomes", "Wait for the run failure outcome", runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        log = g.processor("Run failure recorded", LOG, {"Log Level": "warn", "Log prefix": "loadledger: run failed "})
        g.connect(w, log, ["success"])
        g.connect(log, out, ["success"])
        g.connect(g.input("alerts", "From every group."), alog)
        return g

    def site(self, name, pos, text, inputs, outputs):
        g = self.root.child("SITE " + name, pos=pos, comments="Your own processors go here: " + text)
        g.label("SITE: " + text + "".join([" In: " + "; ".join(inputs) + "." if inputs else "",
                                            " Out: " + "; ".join(outputs) + "." if outputs else ""]), height=260.0)
        for p in inputs:
            g.input(p.split(":")[0])
        for p in outputs:
            g.output(p.split(":")[0])
        return g

    def build(self):
        self.services()
        r = self.root
        pg00, pg05, pg10 = self.pg00_replies(), self.pg05_commands(), self.pg10_coordinator()
        pg20, pg40, pg50 = self.pg20_worker(), self.pg40_staging(), self.pg50_publish()
        pg60, pg90 = self.pg60_target(), self.pg90_failures()
        plan = self.site("Plan manifest (Oracle)", (700, 1000),
                         "read the SCN, count the source and its split column, cut the partitions, and build the "
                         "Manifest record as JSON (runId = ll.run.id).",
                         ["plan manifest: ll.run.id, ll.job.key, ll.business.key, ll.reply.hdfsRunPath, "
                          "ll.reply.stageTable"],
                         ["manifest: the Manifest JSON as content", "manifest failed: ll.error.code, ll.error.message"])
        extract = self.site("Extract partition (Oracle to Parquet on HDFS)", (700, 1500),
                            "extract the partition AS OF SCN ll.reply.snapshotScn between its bounds into Parquet "
                            "files under ll.reply.hdfsRunPath, one FlowFile per file written.",
                            ["extract partition: the work order (ll.reply.*) and ll.run.id, ll.partition.id, "
                             "ll.claim.token"],
                            ["chunk written: ll.chunk.index (0-based), ll.chunk.count, ll.fragment.id, ll.hdfs.path, "
                             "ll.record.count, ll.byte.count, the input's attributes kept",
                             "extraction failed: ll.error.stage, ll.error.class, ll.error.code (ORA-01555 for an "
                             "expired snapshot), ll.error.message"])
        vstage = self.site("Validate staging (Hive)", (1400, 1000),
                           "load the stage table ll.stage.table from ll.hdfs.run.path and measure it.",
                           ["validate staging: the run context ll.*"],
                           ["staging metrics: a JSON array of Metric records (STAGE_COUNT first)",
                            "staging validation failed: ll.error.code, ll.error.message"])
        publish = self.site("Publish (Hive INSERT OVERWRITE)", (1400, 1500),
                            "INSERT OVERWRITE the target partition from ll.stage.table; a failure you cannot "
                            "classify is 'outcome unknown'.",
                            ["publish: the run context and ll.publish.token"],
                            ["published", "publish failed: ll.error.code, ll.error.message",
                             "publish outcome unknown: ll.error.code, ll.error.message"])
        vtarget = self.site("Validate target (Hive)", (2100, 1000), "measure the published target partition.",
                            ["validate target: the run context"],
                            ["target metrics: a JSON array of Metric records (TARGET_COUNT first); ll.target.count",
                             "target validation failed: ll.error.code, ll.error.message"])
        trigger = self.site("Start runs", (0, 1000),
                            "start a run when its data is due (a schedule, a ListenHTTP, a file that lands): one "
                            "FlowFile per run.",
                            [], ["start run: ll.job.key, ll.business.key; optional ll.hdfs.root, "
                                 "ll.stage.table.prefix, ll.allow.empty.source, ll.run.id (to resend a request)"])
        notify = self.site("Notify operators", (2100, 1500), "send the alerts where your operators look.",
                           ["alerts: every attribute of the alert", "run succeeded: the run context"], [])

        def link(a, out, b, inp):
            r.connect(a.output(out), b.input(inp))

        link(pg00, "validation start decisions", pg40, "validation start decisions")
        link(pg00, "chunk outcomes", pg20, "chunk outcomes")
        link(pg00, "partition failure outcomes", pg20, "partition failure outcomes")
        link(pg05, "reissued partitions", pg20, "partitions")
        link(trigger, "start run", pg10, "start run")
        link(pg10, "plan manifest", plan, "plan manifest")
        link(plan, "manifest", pg10, "manifest")
        link(plan, "manifest failed", pg10, "manifest failed")
        link(pg10, "partitions", pg20, "partitions")
        link(pg20, "extract partition", extract, "extract partition")
        link(extract, "chunk written", pg20, "chunk written")
        link(extract, "extraction failed", pg20, "extraction failed")
        link(pg40, "validate staging", vstage, "validate staging")
        link(vstage, "staging metrics", pg40, "staging metrics")
        link(vstage, "staging validation failed", pg40, "staging validation failed")
        link(pg40, "staging validated", pg50, "staging validated")
        link(pg50, "publish", publish, "publish")
        for p in ("published", "publish failed", "publish outcome unknown"):
            link(publish, p, pg50, p)
        link(pg50, "published", pg60, "published")
        link(pg60, "validate target", vtarget, "validate target")
        link(vtarget, "target metrics", pg60, "target metrics")
        link(vtarget, "target validation failed", pg60, "target validation failed")
        link(pg90, "to operators", notify, "alerts")
        link(pg60, "run succeeded", notify, "run succeeded")
        for g in (pg10, pg40, pg60):
            link(g, "run failed", pg90, "run failed")
        for g in (pg00, pg05, pg10, pg20, pg40, pg50, pg60):
            link(g, "alerts", pg90, "alerts")
        r.label("loadledger (%s): the PG groups speak to loadledger through Kafka exactly as the README's 'Plugging "
                "in a NiFi flow' says; the SITE groups are empty: put your Oracle, HDFS and Hive processors there, "
                "keeping the attributes their labels name. Set the Parameter Context 'loadledger', enable the "
                "controller services, then start. nifi/README.md has the details."
                % ("schema registry" if self.variant == "registry" else "embedded schemas"),
                pos=(0.0, -300.0), width=2600.0, height=120.0)
        r._resolve_services()
        r._resolve_processors()
        params = sorted(self.flow.parameters, key=lambda p: p["name"])
        return {
            "flowContents": r.to_json(),
            "externalControllerServices": {},
            "parameterContexts": {"loadledger": {
                "identifier": uid("parameter-context", "loadledger"), "name": "loadledger",
                "componentType": "PARAMETER_CONTEXT", "parameters": params, "inheritedParameterContexts": [],
                "description": "loadledger's flow (%s): nifi/README.md says what to set." % self.variant}},
            "parameterProviders": {},
            "flowEncodingVersion": "1.0",
            "latest": False,
        }

