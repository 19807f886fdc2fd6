# SPDX-License-Identifier: MIT
"""What start-up work was made cheaper still does its job inside.

  * The Java truststore is written as DER by hand (src/creds/truststore.c),
    no longer through OpenSSL's PKCS12 API.  Inside a run with a secret,
    Java's own keytool reads /run/agentbox/truststore.p12 and Debian's
    cacerts path: every certificate of the host's bundle is a trusted entry
    with its exact bytes (SHA-256 fingerprints), plus the session
    CA under its alias; the integrity MAC is real (a wrong password is
    refused).  Without the layer (no secret: nothing is intercepted) there is
    no store.  Java fetching through the interception is test_java.py's.
  * Placeholders are made and removed through one open parent directory per
    run of them: a profile with reserved names in several writable trees
    has them all inside and leaves none of them behind.
"""

import hashlib
from collections import Counter
import json
import os
import re
import ssl

from abtest import describe, skip
from secrets_util import BOUND, Broker, new_value, pem_certs

KEYTOOL = "/usr/bin/keytool"
TRUSTSTORE = "/run/agentbox/truststore.p12"
JAVA_CACERTS = "/etc/ssl/certs/java/cacerts"
DISTRO_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
SRC = "AB_IT_SECRET_SRC"


def _fingerprints(text):
    """SHA-256 fingerprints (keytool's AA:BB:.. form) of keytool -list -v."""
    return re.findall(r"SHA256: ([0-9A-F:]{95})", text)


def _fp(pem):
    d = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
    return ":".join(d[i:i + 2] for i in range(0, 64, 2))


def test_java_truststore_holds_the_bundle(ctx):
    """keytool inside lists the host bundle's certificates, byte for byte, and the
    session CA; the MAC refuses a wrong password."""
    if not os.path.exists(KEYTOOL):
        skip("%s is missing: install openjdk-17-jre-headless (make deps)" % KEYTOOL)
    if not os.path.isfile(DISTRO_BUNDLE):
        skip("no %s on this host" % DISTRO_BUNDLE)
    val = new_value()
    b = Broker(ctx, [val])
    prof = b.write_profile({"KEY": {"from": {"env": SRC}, "hosts": [BOUND]}})
    stores = [TRUSTSTORE] + ([JAVA_CACERTS] if os.path.isfile(JAVA_CACERTS) else [])
    script = []
    for i, s in enumerate(stores):
        script += ["echo '### %d'; keytool -list -v -keystore %s -storepass changeit" % (i, s),
                   "echo '### bad%d'; keytool -list -keystore %s -storepass wrongpass 2>&1; "
                   "echo rc=$?" % (i, s)]
    r = ctx.sandbox(["sh", "-c", "\n".join(script)], profile=prof, env={SRC: val},
                    timeout=150)
    assert r.returncode == 0, describe(r)
    with open(DISTRO_BUNDLE) as fh:
        want = [_fp(p) for p in pem_certs(fh.read())]
    parts = re.split(r"^### (\S+)$", r.stdout, flags=re.M)
    out = dict(zip(parts[1::2], parts[2::2]))
    for i, s in enumerate(stores):
        got = _fingerprints(out.get(str(i), ""))
        assert len(got) == len(want) + 1, "%s: %d entries inside, %d certificates in %s " \
            "plus the session CA expected\n%s" % (s, len(got), len(want), DISTRO_BUNDLE,
                                                 describe(r)[:2000])
        extra = Counter(got) - Counter(want)
        assert sum(extra.values()) == 1 and not Counter(want) - Counter(got), \
            "%s: the entries are not the host bundle's certificates and one more" % s
        assert "Alias name: agentbox-session-ca" in out[str(i)], out[str(i)][-1500:]
        assert out[str(i)].count("Entry type: trustedCertEntry") == len(want) + 1
        bad = out.get("bad%d" % i, "")
        assert "rc=0" not in bad and "integrity check" in bad.lower(), \
            "%s: a wrong password was not refused by the MAC:\n%s" % (s, bad)

    # no secret: nothing intercepted, no store
    r = ctx.sandbox(["sh", "-c", "[ -e %s ] && echo PRESENT || echo ABSENT" % TRUSTSTORE])
    assert r.returncode == 0 and "ABSENT" in r.stdout, describe(r)


def test_placeholders_in_several_trees_are_removed(ctx):
    """Three writable trees besides the workspace: the default profile's
    reserved names are placeholders in each inside, and every one is gone
    from the host after the run."""
    trees = [os.path.join(ctx.projects, d) for d in ("t1", "t2/x", "t3")]
    for t in trees:
        os.makedirs(t, exist_ok=True)
        if ctx.uid != 0:
            os.chown(t, ctx.uid, ctx.gid)
            os.chown(os.path.dirname(t), ctx.uid, ctx.gid)
    prof = ctx.host_file(os.path.join(ctx.scratch, "multi.json"), json.dumps(
        {"version": 1, "extends": "default", "filesystem": {"write": trees}}))
    before = {t: sorted(os.listdir(t)) for t in trees + [ctx.ws]}
    r = ctx.sandbox(["sh", "-c", "for t in %s; do ls -A $t | tr '\\n' ' '; echo; done" %
                     " ".join(trees)], profile=prof)
    assert r.returncode == 0, describe(r)
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(".git" in l.split() and ".envrc" in l.split()
                                   for l in lines), \
        "the placeholders were not there inside:\n" + describe(r)
    after = {t: sorted(os.listdir(t)) for t in trees + [ctx.ws]}
    assert after == before, "placeholders left behind: %r (before: %r)" % (after, before)
