/*
 * redact.h - libpq conninfo strings and the messages that quote them, with every password
 * replaced by "***" before they are logged or shown (log.h: raw secrets are never logged).
 *
 * A password can sit in a conninfo as a keyword value (`password=s`, `sslpassword = 's s'`,
 * quoted or backslash-escaped), in the user info of a URI (`postgresql://u:s@h/db`), as a URI
 * query parameter (`?password=s`, also with a percent-encoded key) and in any of these nested
 * as a value (`dbname=postgresql://u:s@h/db`, which libpq expands). Pure functions, no I/O.
 */
#ifndef LL_REDACT_H
#define LL_REDACT_H

#include <stddef.h>

/* What replaces a secret. */
#define LL_REDACTED "***"

/*
 * Copies conninfo (keyword form or URI; NULL reads as "") into out (outlen > 0 bytes, always
 * NUL-terminated, cut to fit) with the value of every key whose name ends in "password" (any
 * case, percent-decoded) and the password of every postgres:// / postgresql:// user info
 * replaced by LL_REDACTED; quotes around a redacted value stay. When in doubt (an unterminated
 * quote, an '@' further on), more is replaced, never less. Returns out.
 */
char *ll_redact_conninfo(const char *conninfo, char *out, size_t outlen);

/*
 * Copies text (e.g. a libpq connection error, which may quote a malformed conninfo or only a
 * piece of it) into out like ll_redact_conninfo, and also replaces every occurrence of each
 * password found in conninfo (as written, unescaped and percent-decoded). conninfo may be NULL.
 * Should memory run out, out is LL_REDACTED alone. Returns out.
 */
char *ll_redact_secrets(const char *text, const char *conninfo, char *out, size_t outlen);

#endif
