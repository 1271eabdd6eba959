"""NiFi expression-language snippets for the JSON records the flow writes from attributes."""

def s(attr):
    """A required JSON string from an attribute."""
    return '"${%s:escapeJson()}"' % attr


def s_or(attr, default):
    return '"${%s:replaceEmpty(\'%s\'):escapeJson()}"' % (attr, default)


def opt_s(attr):
    """A nullable JSON string: null when the attribute is missing or empty."""
    return "${%s:isEmpty():ifElse('null', ${%s:escapeJson():prepend('\"'):append('\"')})}" % (attr, attr)


def num(attr):
    return "${%s}" % attr


def opt_num(attr):
    return "${%s:isEmpty():ifElse('null', ${%s})}" % (attr, attr)


def boolean(attr):
    return "${%s:equalsIgnoreCase('true')}" % attr


def obj(pairs):
    return "{" + ",".join('"%s":%s' % (k, v) for k, v in pairs) + "}"


