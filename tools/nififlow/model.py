"""The versioned-flow model of NiFi 2.x that flowgen.py builds: process groups, processors, ports,
connections, labels and controller services as the dicts of a RegisteredFlowSnapshot, each property
checked against NiFi 2.6.0's descriptors (components-2.6.0.json) as it is resolved."""
import json
import os
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SCHEMA_DIR = os.path.join(REPO, "schemas", "avro")
OUT_DIR = os.path.join(REPO, "nifi")
NIFI_VERSION = "2.6.0"
NAMESPACE = uuid.UUID("6f1d3c2e-8a4b-5d7e-9f10-2b3c4d5e6f70")

with open(os.path.join(HERE, "components-2.6.0.json")) as _f:
    COMPONENTS = json.load(_f)["components"]

API_ARTIFACT = {
    "org.apache.nifi.kafka.service.api.KafkaConnectionService": "nifi-kafka-service-api-nar",
}
STANDARD_API_NAR = "nifi-standard-services-api-nar"


def uid(*parts):
    return str(uuid.uuid5(NAMESPACE, "/".join(parts)))


class Flow:
    """One flow definition being built."""

    def __init__(self, variant):
        self.variant = variant
        self.parameters = []

    def param(self, name, value, description, sensitive=False):
        self.parameters.append({"name": name, "description": description, "sensitive": sensitive,
                                "provided": False, "value": None if sensitive else value})
        return "#{%s}" % name


class Group:
    """A process group: its components are kept in plain dicts in NiFi's versioned-flow shape."""

    def __init__(self, flow, name, parent=None, comments="", pos=(0, 0)):
        self.flow = flow
        self.name = name
        self.parent = parent
        self.path = (parent.path + "/" if parent else "") + name
        self.id = uid("group", self.path)
        self.comments = comments
        self.pos = pos
        self.processors, self.inputs, self.outputs, self.connections = [], [], [], []
        self.labels, self.services, self.groups = [], [], []
        self.row = 0

    def child(self, name, comments="", pos=(0, 0)):
        g = Group(self.flow, name, self, comments, pos)
        self.groups.append(g)
        return g

    def _find_service(self, ref):
        g = self
        while g:
            for sv in g.services:
                if sv is ref:
                    return sv
            g = g.parent
        raise SystemExit("flowgen: %s: service %s is not in scope" % (self.path, ref["name"]))

    def _props(self, where, cls, props):
        spec = COMPONENTS[cls]
        known = spec["properties"]
        out, descs = {}, {}
        for k, v in props.items():
            d = known.get(k)
            if d is None and not spec.get("dynamicProperties"):
                raise SystemExit("flowgen: %s: %s has no property %r" % (where, cls, k))
            if isinstance(v, dict):  # a controller service
                if d is None or "service" not in d:
                    raise SystemExit("flowgen: %s: %r does not reference a service" % (where, k))
                sv = self._find_service(v)
                if d["service"] not in sv["_apis"]:
                    raise SystemExit("flowgen: %s: %r needs a %s, %s is not one" % (where, k, d["service"], sv["name"]))
                v = sv["identifier"]
            elif d and "allowableValues" in d and not v.startswith("#{") and v not in d["allowableValues"]:
                raise SystemExit("flowgen: %s: %r=%r not in %s" % (where, k, v, d["allowableValues"]))
            out[k] = v
            descs[k] = {"name": k, "displayName": d["displayName"] if d else k,
                        "identifiesControllerService": bool(d and "service" in d),
                        "sensitive": bool(d and d["sensitive"]), "dynamic": d is None}
        return out, descs

    def service(self, name, cls, props, comments=""):
        spec = COMPONENTS[cls]
        sv = {"identifier": uid("service", self.path, name), "name": name, "comments": comments,
              "componentType": "CONTROLLER_SERVICE", "groupIdentifier": self.id, "type": cls,
              "bundle": bundle(spec["artifact"]), "_apis": spec.get("apis", []), "_cls": cls, "_props": props}
        self.services.append(sv)
        return sv

    def _resolve_services(self):
        for sv in self.services:
            props, descs = self._props(self.path + "/" + sv["name"], sv["_cls"], sv["_props"])
            sv["properties"], sv["propertyDescriptors"] = props, descs
            sv["controllerServiceApis"] = [{"type": a, "bundle": bundle(API_ARTIFACT.get(a, STANDARD_API_NAR))}
                                           for a in sv["_apis"]]
            sv["scheduledState"] = "ENABLED"
            sv["bulletinLevel"] = "WARN"
        for g in self.groups:
            g._resolve_services()

    def processor(self, name, cls, props, auto=(), retry=(), comments="", col=0, state="ENABLED",
                  schedule=("TIMER_DRIVEN", "0 sec"), tasks=1, all_nodes=True):
        where = self.path + "/" + name
        if any(p["name"] == name for p in self.processors):
            raise SystemExit("flowgen: %s: two processors of that name" % where)
        spec = COMPONENTS[cls]
        p = {"identifier": uid("processor", where), "name": name, "comments": comments,
             "componentType": "PROCESSOR", "groupIdentifier": self.id, "type": cls,
             "bundle": bundle(spec["artifact"]), "_cls": cls, "_props": props,
             "position": {"x": 80.0 + col * 480.0, "y": 80.0 + self.row * 200.0},
             "style": {}, "schedulingStrategy": schedule[0], "schedulingPeriod": schedule[1],
             "executionNode": "ALL" if all_nodes else "PRIMARY", "penaltyDuration": "30 sec",
             "yieldDuration": "1 sec", "bulletinLevel": "WARN", "runDurationMillis": 0,
             "concurrentlySchedulableTaskCount": tasks, "autoTerminatedRelationships": sorted(auto),
             "scheduledState": state, "retryCount": 10, "retriedRelationships": sorted(retry),
             "backoffMechanism": "PENALIZE_FLOWFILE", "maxBackoffPeriod": "10 mins"}
        self.row += 1
        self.processors.append(p)
        return p

    def _resolve_processors(self):
        for p in self.processors:
            p["properties"], p["propertyDescriptors"] = self._props(self.path + "/" + p["name"], p["_cls"],
                                                                    p["_props"])
        for g in self.groups:
            g._resolve_processors()

    def port(self, kind, name, comments=""):
        lst = self.inputs if kind == "INPUT_PORT" else self.outputs
        for existing in lst:
            if existing["name"] == name:
                return existing
        n = len(lst)
        p = {"identifier": uid(kind, self.path, name), "name": name, "comments": comments,
             "componentType": kind, "groupIdentifier": self.id, "type": kind,
             "position": {"x": -400.0 if kind == "INPUT_PORT" else 1600.0, "y": 80.0 + n * 160.0},
             "concurrentlySchedulableTaskCount": 1, "scheduledState": "ENABLED", "allowRemoteAccess": False,
             "portFunction": "STANDARD"}
        lst.append(p)
        return p

    def input(self, name, comments=""):
        return self.port("INPUT_PORT", name, comments)

    def output(self, name, comments=""):
        return self.port("OUTPUT_PORT", name, comments)

    def connect(self, src, dst, rels=(), load_balance=None):
        """src and dst: components of this group, or ports of its child groups."""
        def end(c):
            return {"id": c["identifier"], "type": c["componentType"], "groupId": c["groupIdentifier"],
                    "name": c["name"], "comments": ""}
        rels = sorted(rels) if src["componentType"] == "PROCESSOR" else [""]
        c = {"identifier": uid("connection", self.path, src["identifier"], dst["identifier"], *rels),
             "name": "", "componentType": "CONNECTION", "groupIdentifier": self.id,
             "source": end(src), "destination": end(dst), "selectedRelationships": rels, "bends": [],
             "labelIndex": 1, "zIndex": 0, "backPressureObjectThreshold": 10000,
             "backPressureDataSizeThreshold": "1 GB", "flowFileExpiration": "0 sec", "prioritizers": [],
             "loadBalanceStrategy": load_balance or "DO_NOT_LOAD_BALANCE", "partitioningAttribute": "",
             "loadBalanceCompression": "DO_NOT_COMPRESS"}
        if src["componentType"] == "PROCESSOR" and src is dst:
            c["bends"] = [{"x": src["position"]["x"] + 380.0, "y": src["position"]["y"] - 40.0},
                          {"x": src["position"]["x"] + 380.0, "y": src["position"]["y"] + 40.0}]
        self.connections.append(c)
        return c

    def label(self, text, pos=(-400.0, -260.0), width=900.0, height=200.0):
        self.labels.append({"identifier": uid("label", self.path, str(len(self.labels))), "label": text,
                            "componentType": "LABEL", "groupIdentifier": self.id,
                            "position": {"x": pos[0], "y": pos[1]}, "width": width, "height": height,
                            "zIndex": 0, "style": {"font-size": "14px"}})

    def to_json(self):
        def clean(items):
            return [{k: v for k, v in it.items() if not k.startswith("_")} for it in items]

        return {
            "identifier": self.id, "name": self.name, "comments": self.comments,
            "componentType": "PROCESS_GROUP", "groupIdentifier": self.parent.id if self.parent else None,
            "position": {"x": float(self.pos[0]), "y": float(self.pos[1])},
            "processGroups": [g.to_json() for g in self.groups], "remoteProcessGroups": [],
            "processors": clean(self.processors), "inputPorts": clean(self.inputs),
            "outputPorts": clean(self.outputs), "connections": self.connections, "labels": self.labels,
            "funnels": [], "controllerServices": clean(self.services),
            "flowFileConcurrency": "UNBOUNDED", "flowFileOutboundPolicy": "STREAM_WHEN_AVAILABLE",
            "defaultFlowFileExpiration": "0 sec", "defaultBackPressureObjectThreshold": 10000,
            "defaultBackPressureDataSizeThreshold": "1 GB", "executionEngine": "INHERITED",
            "scheduledState": "ENABLED", "maxConcurrentTasks": 1, "statelessFlowTimeout": "1 min",
            **({"parameterContextName": "loadledger"} if self.parent is None else {}),
        }


def bundle(artifact):
    return {"group": "org.apache.nifi", "artifact": artifact, "version": NIFI_VERSION}

