"""What the flow must match of loadledger: the topics and their schemas (from the schemas' own doc),
which reply answers which request, the command headers, and the correlation fields of a reply."""
import json
import os
import re

from model import SCHEMA_DIR

def _schemas():
    """Maps each topic (logical name) to its record schema from the schemas' own doc ("Topic x ..."),
    and each request topic to the topic of its reply ("... answer to one <Request>", K§4)."""
    topic_schema, answers = {}, {}
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if not name.endswith(".avsc"):
            continue
        with open(os.path.join(SCHEMA_DIR, name)) as f:
            s = json.load(f)
        m = re.match(r"Topic ([a-z-]+) ", s.get("doc", ""))
        if not m:
            raise SystemExit("flowgen: %s has no 'Topic <name>' doc" % name)
        topic_schema[m.group(1)] = s["name"]
        m2 = re.search(r"answer to one (\w+)", s.get("doc", ""))
        if m2:
            answers[m.group(1)] = m2.group(1)
    topic_of = {v: k for k, v in topic_schema.items()}
    reply_of = {topic_of[req]: reply for reply, req in sorted(answers.items(), key=lambda kv: topic_of[kv[1]])}
    return topic_schema, reply_of


TOPIC_SCHEMA, REPLY_OF = _schemas()
REPLY_TOPICS = [REPLY_OF[t] for t in REPLY_OF]
COMMAND_TOPICS = ["validate-run-commands", "reissue-partition-commands"]
COMMAND_HEADERS = ["jobKey", "runId", "dispatchId", "dispatchType"]
# The correlation of a reply with its request: PG-00's Notify signals
# <broker topic>|runId|partitionId|claimToken|chunkIndex|publishToken|dispatchId|stage of the reply, and
# each Wait the same slots from its request (a slot the request does not have stays empty).
SIGNAL_FIELDS = ["runId", "partitionId", "claimToken", "chunkIndex", "publishToken", "dispatchId", "stage"]
# replies a waiting FlowFile is released by (the others go straight to the group that acts on them)
WAITED = ["run-decisions", "manifest-decisions", "claim-decisions", "validation-metrics-outcomes",
          "stage-validation-outcomes", "publish-claim-decisions", "publish-result-outcomes", "run-success-outcomes",
          "run-failure-outcomes"]
DIRECT = {"validation-start-decisions": "validation start decisions", "chunk-outcomes": "chunk outcomes",
          "partition-failure-outcomes": "partition failure outcomes"}


def reply_fields():
    """Every top-level field of the reply schemas PG-00 copies into ll.reply.* attributes (maps and arrays
    of strings as JSON text): all but the arrays of records (dispatchPartitions can hold 10,000
    partitions; the flow sends the partitions from the manifest it wrote)."""
    fields = []
    for t in REPLY_TOPICS:
        with open(os.path.join(SCHEMA_DIR, TOPIC_SCHEMA[t] + ".avsc")) as f:
            s = json.load(f)
        for fld in s["fields"]:
            typ = fld["type"]
            if isinstance(typ, dict) and typ.get("type") == "array" and isinstance(typ["items"], dict):
                continue
            if fld["name"] not in fields:
                fields.append(fld["name"])
    return fields


def schema_text(name):
    with open(os.path.join(SCHEMA_DIR, name + ".avsc")) as f:
        return json.dumps(json.load(f), separators=(",", ":"))

