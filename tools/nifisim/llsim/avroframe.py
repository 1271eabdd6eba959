"""Avro value framings as NiFi 2.x writes them (kafka-edition.md section 5), with python3-avro.

bare       the binary datum alone ("Do Not Write Schema")
confluent  0x00, 4-byte big-endian schema id, datum
container  an object container file with the schema embedded, null codec
block      a container block without the file header: count, size, datum, 16-byte sync
"""
import io
import json
import os
import struct

import avro.datafile
import avro.io
import avro.schema

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCHEMA_DIR = os.path.join(REPO, "schemas", "avro")

_cache = {}


def schema(name_or_path):
    """Parses schemas/avro/<name>.avsc (or a path to any .avsc)."""
    path = name_or_path if name_or_path.endswith(".avsc") else os.path.join(SCHEMA_DIR, name_or_path + ".avsc")
    if path not in _cache:
        with open(path) as f:
            _cache[path] = avro.schema.parse(f.read())
    return _cache[path]


def datum(record, sch):
    buf = io.BytesIO()
    avro.io.DatumWriter(sch).write(record, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def container(record, sch):
    buf = io.BytesIO()
    w = avro.datafile.DataFileWriter(buf, avro.io.DatumWriter(), sch, codec="null")
    w.append(record)
    w.flush()
    data = buf.getvalue()
    w.close()
    return data


def _zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def block(record, sch, sync=b"S" * 16):
    """NiFi's headerless block: count 1, byte size, datum, sync marker."""
    d = datum(record, sch)
    return _zigzag(1) + _zigzag(len(d)) + d + sync


def encode(record, sch, framing="bare", schema_id=1):
    if isinstance(sch, str):
        sch = schema(sch)
    if framing == "bare":
        return datum(record, sch)
    if framing == "confluent":
        return b"\x00" + struct.pack(">i", schema_id) + datum(record, sch)
    if framing == "container":
        return container(record, sch)
    if framing == "block":
        return block(record, sch)
    raise ValueError("unknown framing " + framing)


def decode(data, sch, framing="bare", writer=None):
    """Reads one record of a reply or command topic."""
    if isinstance(sch, str):
        sch = schema(sch)
    if framing == "container":
        r = avro.datafile.DataFileReader(io.BytesIO(data), avro.io.DatumReader(readers_schema=sch))
        recs = list(r)
        return recs[0]
    if framing == "confluent":
        data = data[5:]
    reader = avro.io.DatumReader(writer or sch, sch)
    return reader.read(avro.io.BinaryDecoder(io.BytesIO(data)))


def schema_json(name):
    with open(os.path.join(SCHEMA_DIR, name + ".avsc")) as f:
        return json.load(f)
