#!/usr/bin/python3
"""Writes the seed inputs of the fuzz targets (docs/fuzzing.md) into OUT/<target>/, with an
independent Avro implementation (Debian's python3-avro):

    /usr/bin/python3 fuzz/make_seeds.py OUT

  fuzz_bare, fuzz_confluent, fuzz_container, fuzz_block
      one selector byte (the reader schema's index in fuzz/harness.h's order: schemas/avro, then
      tests/unit/data, each by file name), then the message value: for every schema two values
      (every union on its last branch with two array/map items, and every union on its first
      branch with empty arrays/maps) in each framing (Confluent id 100 + index), plus the codec
      fixtures of tests/unit/data (tests/unit/gen_codec_fixtures.py) under their own schema;
      fuzz_container also gets writer schemas with logical types (LOGICAL below: decimal on bytes
      and fixed, timestamp-millis/-micros, local-timestamp-*, date, uuid) projected onto the
      project's schema of the same name;
  fuzz_schema
      every .avsc of both folders, and the schema text each container seed embeds.

Also OUT/regress/<target>/: the hostile inputs of issue 7 that once made the codec slow or huge
(fan-out through named types, a "default" bomb, a million nulls); scripts/fuzz.sh --seed copies
them to fuzz/regress/, which every run reads and no merge ever drops.

The committed corpus (fuzz/corpus) is these seeds minimized with libFuzzer's -merge=1 plus what
the fuzzers found since; scripts/fuzz.sh --seed rebuilds it from scratch.
"""
import io
import json
import os
import struct
import sys

import avro.datafile
import avro.io
import avro.schema

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DIRS = [os.path.join(REPO, "schemas", "avro"), os.path.join(REPO, "tests", "unit", "data")]
SYNC = bytes(range(16))


def schemas():
    """(index, name, path) in the harness's order."""
    out = []
    for d in DIRS:
        for f in sorted(os.listdir(d)):
            if f.endswith(".avsc"):
                out.append((len(out), f[:-5], os.path.join(d, f)))
    return out


def value(s, full, depth=0):
    """A value of schema s: full=True takes the last union branch and two items, else the first."""
    t = s.type
    if t == "record":
        return {f.name: value(f.type, full, depth + 1) for f in s.fields}
    if t == "union":
        branches = s.schemas
        if depth > 6:  # a recursive schema (node.avsc) ends in its null branch
            nulls = [b for b in branches if b.type == "null"]
            if nulls:
                return None
        return value(branches[-1] if full else branches[0], full, depth + 1)
    if t == "enum":
        return s.symbols[-1] if full else s.symbols[0]
    if t == "array":
        return [value(s.items, full, depth + 1) for _ in range(2 if full and depth < 6 else 0)]
    if t == "map":
        return {k: value(s.values, full, depth + 1) for k in (["k1", "k2"] if full and depth < 6 else [])}
    if t == "fixed":
        return b"f" * s.size
    return {"null": None, "boolean": full, "int": 7 if full else 0, "long": 1 << 40 if full else -1,
            "float": 1.5, "double": -2.25, "bytes": b"12.34", "string": "2026-09-28" if full else ""}[t]


def bare(s, v):
    buf = io.BytesIO()
    avro.io.DatumWriter(s).write(v, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def zz(n):
    u = ((n << 1) ^ (n >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def container(s, d):
    """An object container file with one block of one datum and the schema's JSON embedded."""
    text = json.dumps(s.to_json(), separators=(",", ":")).encode()
    meta = zz(2) + zz(11) + b"avro.schema" + zz(len(text)) + text + zz(10) + b"avro.codec" + zz(4) + b"null"
    return b"Obj\x01" + meta + zz(0) + SYNC + zz(1) + zz(len(d)) + d + SYNC, text


# (reader schema, {field: (writer type with a logical type, raw value)}): container seeds whose
# embedded writer schema is the reader's with these field types.
LOGICAL = [
    ("Manifest", {"sourceMetrics": ({"type": "map", "values": {"type": "bytes", "logicalType": "decimal",
                                                                "precision": 38, "scale": 2}},
                                    {"AMOUNT_SUM": b"\x31\x32", "NEG": b"\xff", "ZERO": b"\x00"})}),
    ("Manifest", {"sourceMetrics": ({"type": "map", "values": {"type": "fixed", "name": "D8", "size": 8,
                                                                "logicalType": "decimal", "precision": 18,
                                                                "scale": 4}},
                                    {"A": b"\x00\x00\x00\x00\x00\x00\x30\x39", "B": b"\xff" * 8})}),
    ("ChunkWritten", {"runId": ({"type": "string", "logicalType": "uuid"}, "0b4f7c3e-9a51-4d39-8f0e-2f1c5a6b7d80"),
                      "partitionId": ({"type": "int", "logicalType": "date"}, 20724),
                      "claimToken": ({"type": "long", "logicalType": "timestamp-micros"}, -1),
                      "hdfsPath": ({"type": "long", "logicalType": "timestamp-millis"}, 1790598896789),
                      "fragmentIdentifier": (["null", {"type": "long", "logicalType": "local-timestamp-micros"}],
                                             -62135596800000000)}),
    ("ChunkWritten", {"hdfsPath": ({"type": "long", "logicalType": "local-timestamp-millis"}, 951782400000),
                      "recordCount": ({"type": "long", "logicalType": "timestamp-millis"}, -(1 << 62))}),
]


def strip_logical(j):
    """The same schema JSON without logicalType keys (python3-avro then writes the raw values)."""
    if isinstance(j, dict):
        return {k: strip_logical(v) for k, v in j.items() if k != "logicalType"}
    if isinstance(j, list):
        return [strip_logical(v) for v in j]
    return j


def logical_seeds(out, index, paths):
    for n, (reader, fields) in enumerate(LOGICAL):
        with open(paths[reader]) as f:
            wj = json.load(f)
        plain = avro.schema.parse(json.dumps(wj))
        v = value(plain, True)
        for fld in wj["fields"]:
            if fld["name"] in fields:
                fld["type"], v[fld["name"]] = fields[fld["name"]]
                fld.pop("default", None)
        d = bare(avro.schema.parse(json.dumps(strip_logical(wj))), v)
        text = json.dumps(wj, separators=(",", ":")).encode()
        meta = zz(1) + zz(11) + b"avro.schema" + zz(len(text)) + text + zz(0)
        write(out, "fuzz_container", "logical_%d_%s" % (n, reader),
              bytes([index[reader]]) + b"Obj\x01" + meta + SYNC + zz(1) + zz(len(d)) + d + SYNC)
        write(out, "fuzz_schema", "logical_%d_%s.avsc" % (n, reader), text)


def fanout(levels, default=None):
    """R<levels-1> of ten R<levels-2> ... R0 of ten nulls, each type defined at its first use."""
    def build(i):
        if i == 0:
            fields = [{"name": "f%d" % k, "type": "null"} for k in range(10)]
        else:
            fields = [{"name": "f%d" % k, "type": build(i - 1) if k == 0 else "R%d" % (i - 1)} for k in range(10)]
        if default is not None:
            for f in fields:
                f["default"] = None if i == 0 else default
        return {"type": "record", "name": "R%d" % i, "fields": fields}
    return build(levels - 1)


def hostile(out, index):
    """Regression inputs: each is refused quickly by a budget today (docs/design.md section 9)."""
    sel = bytes([index["ChunkWritten"]])
    cases = {
        "fanout_10e10": (fanout(10), b""),
        "default_bomb_10e7": (fanout(8, {}), b""),
        "million_nulls": ({"type": "array", "items": "null"}, zz(1000000) + zz(0)),
    }
    for name, (sch, d) in cases.items():
        text = json.dumps(sch, separators=(",", ":")).encode()
        meta = zz(1) + zz(11) + b"avro.schema" + zz(len(text)) + text + zz(0)
        write(out, "regress/fuzz_container", name, sel + b"Obj\x01" + meta + SYNC + zz(1) + zz(len(d)) + d + SYNC)
        write(out, "regress/fuzz_schema", name, text)


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz-seeds"
    index, paths = {}, {}
    for i, name, path in schemas():
        index[name] = i
        paths[name] = path
        with open(path, "rb") as f:
            text = f.read()
        write(out, "fuzz_schema", name + ".avsc", text)
        s = avro.schema.parse(text.decode())
        sel = bytes([i])
        for full in (True, False):
            tag = "%s_%s" % (name, "full" if full else "min")
            d = bare(s, value(s, full))
            c, embedded = container(s, d)
            write(out, "fuzz_bare", tag, sel + d)
            write(out, "fuzz_confluent", tag, sel + b"\x00" + struct.pack(">I", 100 + i) + d)
            write(out, "fuzz_container", tag, sel + c)
            write(out, "fuzz_block", tag, sel + zz(1) + zz(len(d)) + d + SYNC)
            write(out, "fuzz_schema", tag + ".embedded", embedded)
    logical_seeds(out, index, paths)
    hostile(out, index)
    fixtures = os.path.join(REPO, "tests", "unit", "data")
    for f in sorted(os.listdir(fixtures)):
        if not f.endswith(".bin"):
            continue
        stem = f[:-4]
        framing = next((fr for fr in ("bare", "confluent", "container", "block") if fr in stem), None)
        owner = next((n for n in sorted(index, key=len, reverse=True) if stem.startswith(n)), "sample_v1")
        if framing is None:
            continue
        with open(os.path.join(fixtures, f), "rb") as fh:
            write(out, "fuzz_" + framing, "fixture_" + stem, bytes([index[owner]]) + fh.read())


if __name__ == "__main__":
    main()
