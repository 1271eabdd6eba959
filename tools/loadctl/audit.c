/*
 * audit.c - who did it: the operator identity recorded in the details of every event loadctl
 * writes (PUBLISH_UNKNOWN_RESOLVED, DISPATCH_RESENT, RUN_CLEANED). The contract's reference only
 * knew the role ("operator", §13 "audit identifies only the role"); loadctl adds the person and
 * the machine, so an incident log can name them.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ll/rules.h"
#include "loadctl.h"

/* The person at the keyboard: $SUDO_USER, else the effective user's name, else $USER. */
static void operator_user(char *out, size_t len)
{
    const char *sudo = getenv("SUDO_USER");
    if (sudo && *sudo) {
        snprintf(out, len, "%s", sudo);
        return;
    }
    struct passwd *pw = getpwuid(geteuid());
    if (pw && pw->pw_name && *pw->pw_name) {
        snprintf(out, len, "%s", pw->pw_name);
        return;
    }
    const char *user = getenv("USER");
    if (user && *user)
        snprintf(out, len, "%s", user);
    else
        snprintf(out, len, "uid:%ld", (long)geteuid());
}

json_t *lc_audit_details(void)
{
    char user[256], host[256];
    operator_user(user, sizeof user);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    json_t *d = json_object();
    json_object_set_new(d, "operatorRole", json_string("operator"));
    json_object_set_new(d, "operatorUser", lc_json_str(user));
    json_object_set_new(d, "host", lc_json_str(host));
    return d;
}

int lc_check_reason(const lc_opts *o, const char *reason, const char *what)
{
    if (!reason)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--reason is required: record %s", what);
    /* The contract's input rule (§5.15: reason 5-2000 chars, else 422): refused, not usage. */
    long chars = ll_utf8_chars(reason);
    if (chars < 5 || chars > 2000)
        return lc_fail(o, LC_REFUSED, "INVALID_REASON",
                       json_pack("{s:I,s:i,s:i}", "chars", (json_int_t)chars, "min", 5, "max", 2000),
                       "--reason must be 5..2000 characters of UTF-8 text (got %ld)", chars);
    return LC_CONTINUE;
}
