"""A small evaluator of the NiFi Expression Language subset the shipped flow (nifi/) uses, for the
flow interpreter of the integration tests (llsim.flowrun). It is not NiFi: tests/nifi-flow runs the
same expressions in NiFi's own classes; this one refuses (ValueError) any function it does not know,
so the flow cannot use more EL than the tests understand without a test failing.

    evaluate(text, attrs, params)   #{param} substituted, then every ${...} evaluated

Subjects: an attribute name, UUID(), hostname(true), now(). Functions: escapeJson, replaceEmpty,
isEmpty, ifElse, prepend, append, equals, equalsIgnoreCase, in, and, gt, minus, format(pattern, tz).
"""
import datetime
import json
import re
import socket
import uuid

_PARAM = re.compile(r"#\{([^}]+)\}")


def substitute_params(text, params):
    def sub(m):
        if m.group(1) not in params:
            raise ValueError("no parameter %s" % m.group(1))
        return params[m.group(1)] or ""
    return _PARAM.sub(sub, text)


class _Parser:
    def __init__(self, text, attrs):
        self.t, self.i, self.attrs = text, 0, attrs

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else ""

    def expect(self, s):
        if not self.t.startswith(s, self.i):
            raise ValueError("expected %r at %d in %r" % (s, self.i, self.t))
        self.i += len(s)

    def skip_ws(self):
        while self.peek() in (" ", "\t"):
            self.i += 1

    def expression(self):
        """${ subject (:function(args))* } -> its value (a string, or bool for predicates)."""
        self.expect("${")
        value = self.subject()
        while self.peek() == ":":
            self.i += 1
            value = self.function(value)
        self.expect("}")
        return value

    def name(self):
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match(self.t, self.i)
        if not m:
            raise ValueError("expected a name at %d in %r" % (self.i, self.t))
        self.i = m.end()
        return m.group(0)

    def subject(self):
        n = self.name()
        if self.peek() == "(":
            args = self.args()
            if n == "UUID" and not args:
                return str(uuid.uuid4())
            if n == "hostname":
                return socket.getfqdn() if args and args[0] == "true" else socket.gethostname()
            if n == "now" and not args:
                return datetime.datetime.now(datetime.timezone.utc)
            raise ValueError("unknown subject function %s" % n)
        return self.attrs.get(n, "")

    def args(self):
        self.expect("(")
        out = []
        self.skip_ws()
        while self.peek() != ")":
            c = self.peek()
            if c in ("'", '"'):
                j = self.t.index(c, self.i + 1)
                out.append(self.t[self.i + 1:j])
                self.i = j + 1
            elif self.t.startswith("${", self.i):
                out.append(self.expression())
            else:
                m = re.compile(r"[A-Za-z0-9_.-]+").match(self.t, self.i)
                if not m:
                    raise ValueError("bad argument at %d in %r" % (self.i, self.t))
                out.append(m.group(0))
                self.i = m.end()
            self.skip_ws()
            if self.peek() == ",":
                self.i += 1
                self.skip_ws()
        self.expect(")")
        return out

    def function(self, v):
        n = self.name()
        a = self.args()
        s = _text(v)
        if n == "escapeJson":
            return json.dumps(s)[1:-1]
        if n == "replaceEmpty":
            return a[0] if s.strip() == "" else s
        if n == "isEmpty":
            return s.strip() == ""
        if n == "ifElse":
            return a[0] if v is True or s == "true" else a[1]
        if n == "prepend":
            return a[0] + s
        if n == "append":
            return s + a[0]
        if n == "equals":
            return s == a[0]
        if n == "equalsIgnoreCase":
            return s.lower() == a[0].lower()
        if n == "in":
            return s in a
        if n == "and":
            return (v is True or s == "true") and _text(a[0]) == "true"
        if n == "gt":
            try:
                return float(s) > float(a[0])
            except ValueError:
                return False
        if n == "minus":
            return v - datetime.timedelta(milliseconds=int(a[0]))
        if n == "format":
            tz = datetime.timezone.utc if len(a) > 1 and a[1] in ("GMT", "UTC") else None
            return _java_format(v.astimezone(tz) if tz else v, a[0])
        raise ValueError("unknown function %s" % n)


def _text(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    return v


def _java_format(dt, pattern):
    """The SimpleDateFormat patterns the flow uses: yyyy MM dd HH mm ss SSS and 'quoted' text."""
    fields = {"yyyy": "%04d" % dt.year, "MM": "%02d" % dt.month, "dd": "%02d" % dt.day, "HH": "%02d" % dt.hour,
              "mm": "%02d" % dt.minute, "ss": "%02d" % dt.second, "SSS": "%03d" % (dt.microsecond // 1000)}
    out = []
    for tok in re.findall(r"'[^']*'|yyyy|MM|dd|HH|mm|ss|SSS|.", pattern):
        if tok.startswith("'"):
            out.append(tok[1:-1])
        elif tok in fields:
            out.append(fields[tok])
        elif tok.isalpha():
            raise ValueError("date pattern letter %r not supported" % tok)
        else:
            out.append(tok)
    return "".join(out)


def evaluate(text, attrs, params=None):
    """text with #{param} substituted and every ${...} evaluated against attrs (missing: empty)."""
    text = substitute_params(text, params or {})
    out, i = [], 0
    while True:
        j = text.find("${", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        p = _Parser(text, attrs)
        p.i = j
        out.append(_text(p.expression()))
        i = p.i
