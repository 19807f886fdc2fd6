# SPDX-License-Identifier: MIT
"""Credential brokering for Java, and where the session CA's keys live.

  * Java (openjdk-17-jre-headless: `java Fetch.java` runs a single source
    file; Debian's runtime image has the compiler module) fetches an
    intercepted loopback HTTPS host through the proxy with the placeholder
    in a header, trusting the session CA only through what agentbox gives
    it: the PKCS#12 truststore at /run/agentbox/truststore.p12 named in
    JAVA_TOOL_OPTIONS, and the same store over Debian's Java truststore
    (/etc/ssl/certs/java/cacerts) when JAVA_TOOL_OPTIONS lacks the options.
    The upstream receives the real value.  Java verifies for real: with a
    truststore holding only the upstream's own test CA it refuses the
    interception's leaf and nothing reaches the upstream.
  * The session CA's keys are made in OpenSSL's secure heap: while a run
    with secrets is up, agentbox's parent has a 1 MiB mapping that is locked
    (VmFlags lo) and not dumped (dd); a run without secrets locks nothing.
    With RLIMIT_MEMLOCK too low for it, the run still works and says so once
    on stderr.
"""

import os
import resource
import select
import shutil
import subprocess
import time

import abtest
from abtest import ab_cmd, describe, nobody_only, skip
from secrets_util import BOUND, Broker, new_value, pem_certs

JAVA = "/usr/bin/java"
KEYTOOL = "/usr/bin/keytool"
SRC = "AB_IT_SECRET_SRC"
TRUSTSTORE = "/run/agentbox/truststore.p12"
JAVA_CACERTS = "/etc/ssl/certs/java/cacerts"
DISTRO_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
SECURE_HEAP_KB = 1024  # AB_CA_SECURE_HEAP (include/agentbox/ca.h)
NOT_LOCKED = "the session CA's keys are not locked in memory"

FETCH_JAVA = r'''
import java.io.InputStream;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.security.cert.X509Certificate;
import javax.net.ssl.HttpsURLConnection;

/* GET args[0] with the placeholder of $KEY in x-api-key; default TLS
 * verification (trust store, chain, host name); one key=value per line. */
public class Fetch {
    public static void main(String[] args) {
        try {
            HttpsURLConnection c = (HttpsURLConnection) new URL(args[0]).openConnection();
            c.setConnectTimeout(15000);
            c.setReadTimeout(15000);
            c.setRequestProperty("x-api-key", System.getenv("KEY"));
            int status = c.getResponseCode();
            X509Certificate leaf = (X509Certificate) c.getServerCertificates()[0];
            InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream();
            String body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            System.out.println("status=" + status);
            System.out.println("issuer=" + leaf.getIssuerX500Principal().getName());
            System.out.println("body=" + body.replace('\n', ' '));
        } catch (Exception e) {
            System.out.println("error=" + e.getClass().getName() + ": " + e.getMessage());
        }
    }
}
'''


def secret_profile(b):
    return b.write_profile({"KEY": {"from": {"env": SRC}, "hosts": [BOUND]}})


def sections(text):
    """{name: text} of the '### name' sections of the inner script's output."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("### "):
            cur = line[4:].strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def fields(text):
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k in ("status", "issuer", "body", "error"):
            out[k] = v
    return out


def need_java():
    for p in (JAVA, KEYTOOL):
        if not os.path.exists(p):
            skip("%s is missing: install openjdk-17-jre-headless (make deps)" % p)


def test_java_trusts_the_session_ca(ctx):
    """Java fetches the bound host through the proxy with the placeholder;
    the upstream gets the real value; Java trusts only because of agentbox's
    truststore (JAVA_TOOL_OPTIONS, and Debian's cacerts path), refuses with
    a truststore of other roots; no truststore without secrets."""
    need_java()
    val = new_value()
    b = Broker(ctx, [val])
    prof = secret_profile(b)
    ctx.host_file(os.path.join(ctx.ws, "Fetch.java"), FETCH_JAVA)
    # a truststore of the upstream's own CA only: what Java would need to
    # reach the upstream directly, useless against the interception
    other = os.path.join(ctx.ws, "other.p12")
    r = subprocess.run([KEYTOOL, "-importcert", "-noprompt", "-alias", "upstream-test-ca",
                        "-file", b.ca_file, "-keystore", other, "-storetype", "PKCS12",
                        "-storepass", "changeit"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, "keytool -importcert failed: %s" % r.stdout
    if ctx.uid != 0:
        os.chown(other, ctx.uid, ctx.gid)
    have_cacerts = os.path.isfile(JAVA_CACERTS) and not os.path.islink(JAVA_CACERTS)
    url = "https://%s/java-" % BOUND
    script = "\n".join([
        "cd %s" % ctx.ws,
        "echo '### env'; echo \"$JAVA_TOOL_OPTIONS\"",
        "echo '### default'; java Fetch.java %sdefault" % url,
        # the proxy options alone: Java's default truststore is cacerts
        "echo '### cacerts'; JAVA_TOOL_OPTIONS=$(echo \"$JAVA_TOOL_OPTIONS\" | "
        "sed 's/ -Djavax[^ ]*//g') java Fetch.java %scacerts" % url,
        "echo '### other'; java -Djavax.net.ssl.trustStore=%s "
        "-Djavax.net.ssl.trustStorePassword=changeit Fetch.java %sother" % (other, url),
        "echo '### keytool'; keytool -list -keystore %s -storepass changeit" % TRUSTSTORE,
        "echo '### readonly'; if (echo x >> %s) 2>/dev/null; then echo WRITABLE; fi" %
        TRUSTSTORE,
    ])
    r = ctx.sandbox(["sh", "-c", script], profile=prof, env={SRC: val}, timeout=150)
    assert r.returncode == 0, describe(r)
    out = sections(r.stdout)
    problems = []
    jto = out.get("env", "").split()
    for opt in ("-Djavax.net.ssl.trustStore=" + TRUSTSTORE,
                "-Djavax.net.ssl.trustStoreType=PKCS12",
                "-Djavax.net.ssl.trustStorePassword=changeit", "-Dhttps.proxyHost=127.0.0.1"):
        if opt not in jto:
            problems.append("JAVA_TOOL_OPTIONS inside lacks %s: %r" % (opt, out.get("env")))
    cases = ["default"] + (["cacerts"] if have_cacerts else [])
    for case in cases:
        f = fields(out.get(case, ""))
        if f.get("status") != "200":
            problems.append("java (%s): %s" % (case, out.get(case)))
            continue
        if "agentbox session issuing CA" not in f.get("issuer", ""):
            problems.append("java (%s): the leaf was issued by %r, not the session CA" % (
                case, f.get("issuer")))
        seen = b.api.header("/java-" + case, "x-api-key")
        if seen != [val]:
            problems.append("java (%s): the upstream received x-api-key %r, expected the "
                            "real value" % (case, ["<value>" if x == val else x for x in seen]))
        if val in f.get("body", ""):
            problems.append("java (%s): the real value came back to Java" % case)
    f = fields(out.get("other", ""))
    if "status" in f or "SSLHandshakeException" not in f.get("error", ""):
        problems.append("java with a truststore of other roots did not refuse the "
                        "interception: %s" % out.get("other"))
    if b.api.find("/java-other"):
        problems.append("the upstream received the request Java should have refused")
    with open(DISTRO_BUNDLE) as fh:
        n_host = len(pem_certs(fh.read()))
    kt = out.get("keytool", "")
    want = "Your keystore contains %d entries" % (n_host + 1)
    if want not in kt or "agentbox-session-ca" not in kt or \
            kt.count("trustedCertEntry") != n_host + 1:
        problems.append("keytool -list of %s: expected %d trusted entries incl. "
                        "agentbox-session-ca:\n%s" % (TRUSTSTORE, n_host + 1, kt[:600]))
    if "WRITABLE" in out.get("readonly", ""):
        problems.append("%s is writable inside" % TRUSTSTORE)
    if val in r.stdout or val in r.stderr:
        problems.append("the real value is in the sandbox's output")
    assert not problems, "\n".join(problems) + "\n" + b.summary() + "\n" + \
        describe(r).replace(val, "<VALUE>")

    # without secrets: no interception, no truststore, no trust options
    r = ctx.sandbox(["sh", "-c", "echo \"$JAVA_TOOL_OPTIONS\"; "
                     "if [ -e %s ]; then echo PRESENT; else echo ABSENT; fi" % TRUSTSTORE])
    assert r.returncode == 0, describe(r)
    assert "trustStore" not in r.stdout and "ABSENT" in r.stdout, \
        "a run without secrets has Java trust options or a truststore:\n" + describe(r)


# ---------------------------------------------------------------- the secure heap

def _memlock(user):
    """Can agentbox, run as `user`, lock its secure heap?  True: surely (root
    has CAP_IPC_LOCK; a limit of 2 MiB or more); False: surely not (a limit
    below 1 MiB); None: the kernel decides (what else the process locked)."""
    if user == "root" and abtest.IS_ROOT:
        return True
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= 2 * SECURE_HEAP_KB * 1024:
        return True
    return False if soft < SECURE_HEAP_KB * 1024 else None


def _locked_arena(pid):
    """(VmLck kB, [VmFlags of the 1 MiB mappings]) of a process."""
    vmlck = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmLck:"):
                vmlck = int(line.split()[1])
    flags = []
    try:
        with open("/proc/%d/smaps" % pid) as f:
            size = None
            for line in f:
                if line.startswith("Size:"):
                    size = int(line.split()[1])
                elif line.startswith("VmFlags:") and size == SECURE_HEAP_KB:
                    flags.append(line.split()[1:])
    except PermissionError:
        flags = None  # not ours to read (an unprivileged runner)
    return vmlck, flags


def _while_running(ctx, args, env, fn):
    """Start agentbox with `args`, whose command prints 'ready' and waits for
    a file; call fn(agentbox's pid) once it is ready; let it finish."""
    go = os.path.join(ctx.ws, ".go")
    # a call before in the same test left it: the command would not wait,
    # and agentbox could be gone (no VmLck to read) before fn looks
    if os.path.lexists(go):
        os.unlink(go)
    p = ctx.popen(args + ["--", "sh", "-c",
                          "echo ready; while [ ! -e %s ]; do sleep 0.05; done" % go], env=env)
    line, deadline = b"", time.monotonic() + 60
    while b"ready\n" not in line and time.monotonic() < deadline and p.poll() is None:
        rr, _, _ = select.select([p.stdout], [], [], 0.5)
        if rr:
            d = os.read(p.stdout.fileno(), 4096)
            if not d:
                break
            line += d
    try:
        assert b"ready\n" in line, "the sandbox never got ready"
        res = fn(p.pid)
    finally:
        ctx.host_file(go, "")
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    assert p.returncode == 0, "agentbox exited %s: %s" % (p.returncode, err.decode()[-2000:])
    return res, err.decode("utf-8", "replace")


def test_secure_heap_holds_the_keys(ctx):
    """With secrets, agentbox's parent has OpenSSL's 1 MiB secure heap,
    locked and not dumped; without, nothing is locked (no startup cost)."""
    val = new_value()
    b = Broker(ctx, [val])
    prof = secret_profile(b)
    (vmlck, flags), err = _while_running(ctx, ["run", "-p", prof, "-w", ctx.ws],
                                         {SRC: val}, _locked_arena)
    can = _memlock(ctx.user)
    locked = vmlck is not None and vmlck >= SECURE_HEAP_KB
    # locked, or said so: never both, never neither
    assert locked != (NOT_LOCKED in err), \
        "agentbox locks %s kB with secrets; its stderr: %s" % (vmlck, err)
    if can is not None:
        assert locked == can, "agentbox locks %s kB with secrets, expected the %d kB " \
            "heap %s; stderr: %s" % (vmlck, SECURE_HEAP_KB, "locked" if can else "not", err)
    if locked and flags is not None:
        assert any("lo" in f and "dd" in f for f in flags), \
            "no locked (lo), undumped (dd) 1 MiB mapping in agentbox: %s" % flags
    (vmlck, _), err = _while_running(ctx, ["run", "-w", ctx.ws], None, _locked_arena)
    assert vmlck == 0, "a run without secrets locks %s kB" % vmlck


@nobody_only
def test_secure_heap_not_locked_is_said(ctx):
    """RLIMIT_MEMLOCK too low for the secure heap: the run works (the
    intercepted request gets the real value) and stderr says, once, that the
    keys are not locked in memory."""
    if shutil.which("prlimit") is None:
        skip("prlimit (util-linux) is missing")
    val = new_value()
    b = Broker(ctx, [val])
    prof = secret_profile(b)
    inner = ["sh", "-c", "curl -sS --max-time 15 -o /dev/null -w '%%{http_code}' "
             "-H \"x-api-key: $KEY\" https://%s/low-memlock" % BOUND]
    cmd = ["prlimit", "--memlock=65536"] + ab_cmd(["run", "-p", prof, "-w", ctx.ws, "--"] +
                                                  inner, ctx.user)
    r = subprocess.run(cmd, env=ctx.env({SRC: val}), cwd=ctx.ws, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "200", \
        "exit %s, stdout %r, stderr %s" % (r.returncode, r.stdout, r.stderr[-2000:])
    assert b.api.header("/low-memlock", "x-api-key") == [val], \
        "the upstream did not get the real value: " + b.summary()
    assert r.stderr.count(NOT_LOCKED) == 1, \
        "expected one warning about the unlocked keys, stderr: %s" % r.stderr[-2000:]
    assert "RLIMIT_MEMLOCK (64 KiB)" in r.stderr, r.stderr[-2000:]
    assert val not in r.stdout + r.stderr
