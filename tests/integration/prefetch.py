#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Install the pinned harnesses the end-to-end tests run (Claude Code, Codex,
Gemini CLI, opencode) into the test npm cache, before the suite starts: a cold
install can take longer than one test's timeout.  Each install is the test
module's own function (same pins, same cache, same marker); a warm cache makes
this a no-op.  Needs the npm registry; without npm the harness tests skip.

    python3 tests/integration/prefetch.py --binary build/agentbox
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import abtest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    abtest.BINARY = os.path.abspath(args.binary)
    abtest.SRCDIR = os.path.dirname(os.path.dirname(HERE))
    import test_harness_claude as claude  # noqa: E402
    import test_harness_codex as codex    # noqa: E402
    import test_harness_others as others  # noqa: E402
    jobs = [("claude-code", claude.claude_prefix), ("codex", codex.codex_prefix),
            ("gemini-cli", lambda: others.npm_install(others.GEMINI_PKG, others.GEMINI_VER,
                                                      others.GEMINI_DIR)),
            ("opencode", lambda: others.npm_install(others.OPENCODE_PKG, others.OPENCODE_VER,
                                                    others.OPENCODE_DIR))]
    failed = 0
    for name, fn in jobs:
        t0 = time.monotonic()
        try:
            prefix = fn()
            print("prefetch: %s ready in %.1fs (%s)" % (name, time.monotonic() - t0, prefix))
        except abtest.Skip as e:
            print("prefetch: %s skipped: %s" % (name, e))
        except BaseException as e:  # the tests will report it again, with detail
            failed += 1
            print("prefetch: %s FAILED: %s" % (name, str(e)[:2000]))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
