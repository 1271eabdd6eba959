#!/usr/bin/python3
"""Generates the binary fixtures of the codec unit tests with an independent Avro implementation
(Debian's python3-avro 1.11.1), into tests/unit/data. The outputs are committed, so the unit
tests never need Python; rerun only when the schemas or values below change:

    /usr/bin/python3 tests/unit/gen_codec_fixtures.py

Every fixture is written in the framings of docs/contract.md K§5:
  bare      - the datum alone
  confluent - 0x00, 4-byte big-endian schema id (ids.json), datum
  container - an object container file (DataFileWriter, null codec)
  block     - the container minus its header: count, size, datum, sync (NiFi's PublishKafka)
Each <name>.expected.json holds the value as ll_decode must return it with sample_v1.avsc as
the reader (bytes as a string of the raw bytes, unions unwrapped, defaults filled).
"""
import io
import json
import os
import struct
import sys

import avro.datafile
import avro.io
import avro.schema

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
IDS = {"sample_v0": 3, "sample_v1": 7, "sample_v2": 9, "sample_nifi": 11}


def load(name):
    with open(os.path.join(DATA, name + ".avsc"), encoding="utf-8") as f:
        return avro.schema.parse(f.read())


def zz(n):
    """Avro zig-zag varint of a long."""
    u = (n << 1) ^ (n >> 63)
    u &= (1 << 64) - 1
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def bare(schema, datum, writer_cls=avro.io.DatumWriter):
    buf = io.BytesIO()
    writer_cls(schema).write(datum, avro.io.BinaryEncoder(buf))
    return buf.getvalue()


def read_bare(schema, data, reader_schema=None):
    return avro.io.DatumReader(schema, reader_schema).read(avro.io.BinaryDecoder(io.BytesIO(data)))


def container(schema, records, codec="null", flush_between=False):
    buf = io.BytesIO()
    w = avro.datafile.DataFileWriter(buf, avro.io.DatumWriter(), schema, codec=codec)
    for i, r in enumerate(records):
        if flush_between and i > 0:
            w.flush()
        w.append(r)
    w.flush()
    data = buf.getvalue()
    w.close()
    return data


def header_length(data):
    r = avro.datafile.DataFileReader(io.BytesIO(data), avro.io.DatumReader())
    n = r.reader.tell()  # the reader stops right after the header's sync marker
    r.close()
    return n


def confluent(schema_id, datum_bytes):
    return b"\x00" + struct.pack(">I", schema_id) + datum_bytes


def write(name, data):
    with open(os.path.join(DATA, name), "wb") as f:
        f.write(data)


def write_json(name, value):
    with open(os.path.join(DATA, name), "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


class NegativeBlockWriter(avro.io.DatumWriter):
    """Writes arrays and maps as Java's blocking encoder does: a negative count followed by the
    block's byte size; arrays of more than one item in two blocks."""

    def _blocks(self, items, write_item, encoder):
        chunks = [items[:1], items[1:]] if len(items) > 1 else [items]
        for chunk in chunks:
            if not chunk:
                continue
            sub = io.BytesIO()
            enc = avro.io.BinaryEncoder(sub)
            for it in chunk:
                write_item(it, enc)
            encoder.write_long(-len(chunk))
            encoder.write_long(len(sub.getvalue()))
            encoder.write(sub.getvalue())
        encoder.write_long(0)

    def write_array(self, writers_schema, datum, encoder):
        self._blocks(list(datum), lambda it, enc: self.write_data(writers_schema.items, it, enc), encoder)

    def write_map(self, writers_schema, datum, encoder):
        def item(kv, enc):
            enc.write_utf8(kv[0])
            self.write_data(writers_schema.values, kv[1], enc)

        self._blocks(list(datum.items()), item, encoder)


A = {
    "id": "run-0001",
    "count": 1234567890123,
    "small": -42,
    "flag": True,
    "note": "h\u00e9llo w\u00f6rld",
    "size": 9007199254740993,
    "ratio": 2.25,
    "status": "DONE",
    "tags": {"env": "prod", "team": "ingest"},
    "items": [{"name": "a", "qty": 3, "label": None}, {"name": "b", "qty": -1, "label": "x"}],
    "blob": b"raw\x01bytes",
    "weight": 0.25,
}


def expected_of(v1_value):
    out = dict(v1_value)
    out["blob"] = out["blob"].decode("utf-8")
    return out


B_V0 = {
    "id": "run-0000",
    "count": 77,
    "small": 5,
    "flag": False,
    "note": None,
    "tags": {"k": "v"},
    "items": [{"name": "p"}, {"name": "q"}],
}
B_EXPECTED = {
    "id": "run-0000",
    "count": 77,
    "small": 5,
    "flag": False,
    "note": None,
    "size": None,
    "ratio": 0.5,
    "status": "NEW",
    "tags": {"k": "v"},
    "items": [{"name": "p", "qty": 1, "label": None}, {"name": "q", "qty": 1, "label": None}],
    "blob": "",
    "weight": 1.5,
}

C_V2 = dict(A)
C_V2.update(
    {
        "origin": "kafka",
        "status": "ARCHIVED",
        "items": [{"name": "a", "qty": 3, "label": None, "checksum": 99}],
        "trailer": {"t": [1, 2, 3]},
    }
)
C_EXPECTED = expected_of(A)
C_EXPECTED.update({"status": "NEW", "items": [{"name": "a", "qty": 3, "label": None}]})


def main():
    v0, v1, v2, nifi, node = (load(n) for n in ("sample_v0", "sample_v1", "sample_v2", "sample_nifi", "node"))

    # 1. the current schema in all four framings
    d = bare(v1, A)
    assert read_bare(v1, d) == A
    write("sample_v1_bare.bin", d)
    write("sample_v1_confluent.bin", confluent(IDS["sample_v1"], d))
    c = container(v1, [A])
    write("sample_v1_container.bin", c)
    block = c[header_length(c):]
    assert block[:1] == zz(1) and block.endswith(c[header_length(c) - 16:header_length(c)])
    write("sample_v1_block.bin", block)
    write_json("sample_v1.expected.json", expected_of(A))

    # 2. an older writer (fields missing -> reader defaults, int -> long)
    d0 = bare(v0, B_V0)
    assert read_bare(v0, d0, v1)["ratio"] == 0.5  # python agrees on the projection
    write("sample_v0_container.bin", container(v0, [B_V0]))
    write("sample_v0_confluent.bin", confluent(IDS["sample_v0"], d0))
    write_json("sample_v0.expected.json", B_EXPECTED)

    # 3. a newer writer (extra fields dropped, unknown enum symbol -> reader enum default)
    d2 = bare(v2, C_V2)
    write("sample_v2_container.bin", container(v2, [C_V2]))
    write("sample_v2_confluent.bin", confluent(IDS["sample_v2"], d2))
    write_json("sample_v2.expected.json", C_EXPECTED)

    # 4. NiFi's union order ["string","null"]: fine with its own schema, wrong with ours
    dn = bare(nifi, A)
    write("sample_nifi_bare.bin", dn)
    write("sample_nifi_container.bin", container(nifi, [A]))
    write("sample_nifi_confluent.bin", confluent(IDS["sample_nifi"], dn))

    # 5. negative block counts (array and map), checked against python's reader
    dneg = bare(v1, A, NegativeBlockWriter)
    assert dneg != d and read_bare(v1, dneg) == A
    write("sample_v1_negblocks_bare.bin", dneg)

    # 6. a recursive schema, three levels
    n3 = {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}}
    write("node_3_bare.bin", bare(node, n3))

    # 7. containers the codec must refuse
    write("container_deflate.bin", container(v1, [A], codec="deflate"))
    write("container_two_records.bin", container(v1, [A, A]))
    write("container_two_blocks.bin", container(v1, [A, A], flush_between=True))
    sync = bytes(range(16))
    hostile_schema = b'{"type":"fixed","name":"F","size":-1}'
    write(
        "container_negative_fixed.bin",
        b"Obj\x01"
        + zz(2)
        + zz(11) + b"avro.schema" + zz(len(hostile_schema)) + hostile_schema
        + zz(10) + b"avro.codec" + zz(4) + b"null"
        + zz(0)
        + sync
        + zz(1) + zz(4) + b"\x00\x00\x00\x00"
        + sync,
    )
    print("fixtures written to", DATA)
    return 0


if __name__ == "__main__":
    sys.exit(main())
