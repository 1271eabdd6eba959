"""The run's life after extraction as NiFi's validation and publish flows report it
(PG-05 control receiver, PG-40 staging validation, PG-50 publish, PG-60 target validation)."""
import uuid

from . import kafkaio

kafkaio.SCHEMAS.update({
    "validation-starts": "ValidationStart",
    "validation-start-decisions": "ValidationStartDecision",
    "validation-metrics": "ValidationMetrics",
    "validation-metrics-outcomes": "ValidationMetricsOutcome",
    "stage-validations": "StageValidated",
    "stage-validation-outcomes": "StageValidatedOutcome",
    "run-successes": "RunSuccess",
    "run-success-outcomes": "RunSuccessOutcome",
    "run-failures": "RunFailure",
    "run-failure-outcomes": "RunFailureOutcome",
    "publish-claims": "PublishClaim",
    "publish-claim-decisions": "PublishClaimDecision",
    "publish-results": "PublishResult",
    "publish-result-outcomes": "PublishResultOutcome",
})

REPLIES = ("validation-start-decisions", "validation-metrics-outcomes", "stage-validation-outcomes",
           "run-success-outcomes", "run-failure-outcomes", "publish-claim-decisions", "publish-result-outcomes")


def metric(name, actual, result="PASS", expected=None):
    return {"metricName": name, "expectedValue": expected, "actualValue": actual, "tolerance": None,
            "result": result, "details": {}}


def staging_metrics(run, fail=()):
    return [metric("STAGE_COUNT", str(run.source_count), "FAIL" if "STAGE_COUNT" in fail else "PASS",
                   str(run.source_count)),
            metric("AMOUNT_SUM", "52500000.00", "FAIL" if "AMOUNT_SUM" in fail else "PASS", "52500000.00")]


def target_metrics(run, fail=()):
    return [metric("TARGET_COUNT", str(run.source_count), "FAIL" if "TARGET_COUNT" in fail else "PASS",
                   str(run.source_count)),
            metric("AMOUNT_SUM", "52500000.00", "FAIL" if "AMOUNT_SUM" in fail else "PASS", "52500000.00")]


class Lifecycle:
    """Validation and publish events of one flow, with their reply readers opened first."""

    def __init__(self, flow):
        self.flow = flow
        self.nifi = flow.nifi
        for t in REPLIES:
            flow.r[t] = self.nifi.reader(t)

    def _send(self, topic, rec, reply, run_id, pred=lambda v: True):
        """Publishes one event and returns the reply to it: the first matching reply after those
        already seen (a repeated request gets its own, new reply)."""
        reader = self.flow.r[reply]
        reader.drain(0.2)
        seen = sum(1 for r in reader.records if r["value"]["runId"] == run_id and pred(r["value"]))
        self.nifi.send(topic, rec)
        self.nifi.flush()
        return self.flow.reply(reply, run_id, pred, count=seen + 1)[seen]

    def start_validation(self, run, dispatch_id, node="nifi-node-2"):
        rec = {"runId": run.run_id, "dispatchId": dispatch_id, "node": node}
        return self._send("validation-starts", rec, "validation-start-decisions", run.run_id,
                          lambda v: v["dispatchId"] == dispatch_id)

    def metrics(self, run, stage, metrics, version="v1"):
        rec = {"runId": run.run_id, "stage": stage, "queryVersion": version, "metrics": metrics}
        return self._send("validation-metrics", rec, "validation-metrics-outcomes", run.run_id,
                          lambda v: v["stage"] == stage)

    def stage_validated(self, run):
        return self._send("stage-validations", {"runId": run.run_id}, "stage-validation-outcomes", run.run_id)

    def claim_publish(self, run, token=None):
        token = token or str(uuid.uuid4())
        d = self._send("publish-claims", {"runId": run.run_id, "publishToken": token}, "publish-claim-decisions",
                       run.run_id, lambda v: v["publishToken"] == token)
        return token, d

    def publish_result(self, run, token, outcome="PUBLISHED", code=None, message=""):
        rec = {"runId": run.run_id, "publishToken": token, "outcome": outcome, "errorCode": code, "message": message}
        return self._send("publish-results", rec, "publish-result-outcomes", run.run_id,
                          lambda v: v["publishToken"] == token)

    def success(self, run, target_count=None):
        return self._send("run-successes", {"runId": run.run_id, "targetCount": target_count},
                          "run-success-outcomes", run.run_id)

    def fail(self, run, expected, fail, code="FLOW_ERROR", stage="PG-40", message="failed"):
        rec = {"runId": run.run_id, "expectedStatus": expected, "failStatus": fail, "errorStage": stage,
               "errorCode": code, "message": message}
        return self._send("run-failures", rec, "run-failure-outcomes", run.run_id)

    def to_success(self, run, dispatch_id):
        """Validation and publish after EXTRACTED_VALIDATED, as PG-40, PG-50 and PG-60 report them."""
        steps = {"start": self.start_validation(run, dispatch_id)}
        steps["staging"] = self.metrics(run, "STAGING", staging_metrics(run))
        steps["stage_validated"] = self.stage_validated(run)
        token, steps["publish_claim"] = self.claim_publish(run)
        steps["publish_result"] = self.publish_result(run, token)
        steps["target"] = self.metrics(run, "TARGET", target_metrics(run))
        steps["success"] = self.success(run)
        steps["publish_token"] = token
        return steps
