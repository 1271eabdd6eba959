"""Driving a run through the main path and waiting for loadledger's answers."""
from .kafkaio import Nifi


class Flow:
    """The reply readers of one scenario, opened before anything is sent."""

    REPLIES = ("run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes",
               "partition-failure-outcomes", "validate-run-commands")

    def __init__(self, nifi: Nifi):
        self.nifi = nifi
        self.r = {t: nifi.reader(t) for t in self.REPLIES}

    def close(self):
        for r in self.r.values():
            r.close()

    def reply(self, topic, run_id, pred=lambda v: True, count=1, timeout=60):
        hits = self.r[topic].wait_for(lambda rec: rec["value"]["runId"] == run_id and pred(rec["value"]),
                                      count=count, timeout=timeout)
        return [h["value"] for h in hits]

    def create(self, run, framing="bare"):
        self.nifi.send("run-requests", run.run_request(), framing=framing)
        self.nifi.flush()
        return self.reply("run-decisions", run.run_id)[-1]

    def register(self, run, framing="bare", **over):
        self.nifi.send("manifests", run.manifest(**over), framing=framing)
        self.nifi.flush()
        return self.reply("manifest-decisions", run.run_id)[-1]

    def claim_all(self, run):
        for pid in run.nonempty():
            self.nifi.send("partition-claims", run.claim(pid))
        self.nifi.flush()
        return self.reply("claim-decisions", run.run_id, count=len(run.nonempty()))

    def extract_all(self, run, framing="bare"):
        sent = 0
        for pid in run.nonempty():
            for c in run.chunks(pid):
                self.nifi.send("chunks", c, framing=framing)
                sent += 1
        self.nifi.flush()
        return self.reply("chunk-outcomes", run.run_id, count=sent)

    def validate_commands(self, run, count=1, timeout=60):
        return self.reply("validate-run-commands", run.run_id, count=count, timeout=timeout)

    def to_extracted(self, run):
        """The main path: request, manifest, claims, chunks, then the one validate-run command."""
        steps = {"run": self.create(run), "manifest": self.register(run), "claims": self.claim_all(run)}
        steps["chunks"] = self.extract_all(run)
        steps["commands"] = self.validate_commands(run)
        return steps
