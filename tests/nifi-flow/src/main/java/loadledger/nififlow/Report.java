package loadledger.nififlow;

/**
 * One line per check on standard output: {@code OK}, {@code FAIL} or {@code NOTE} (a fact worth
 * knowing that is not a failure: a stand-in used, a component left to the Python check), then the
 * flow file and what was checked. The exit status is non-zero when any line is a FAIL.
 */
final class Report {
    private int ok;
    private int failed;
    private String flow = "-";

    void flow(final String name) {
        flow = name;
    }

    void ok(final String what) {
        ok++;
        line("OK  ", what);
    }

    void fail(final String what) {
        failed++;
        line("FAIL", what);
    }

    void note(final String what) {
        line("NOTE", what);
    }

    /** ok or fail, with the same text plus the reason when it failed. */
    void check(final boolean good, final String what, final String whyNot) {
        if (good) {
            ok(what);
        } else {
            fail(what + ": " + whyNot);
        }
    }

    int failed() {
        return failed;
    }

    int passed() {
        return ok;
    }

    private void line(final String tag, final String what) {
        // one line per check: a multi-line NiFi message stays on its line
        System.out.println(tag + " [" + flow + "] " + what.replace("\r", "").replace("\n", " | "));
        System.out.flush();
    }
}
