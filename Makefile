# agentbox — plain GNU make.  See README.md.
VERSION    := 0.1.0
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
DATADIR    ?= $(PREFIX)/share/agentbox
MANDIR     ?= $(PREFIX)/share/man
DESTDIR    ?=
BUILD      ?= build

CC         ?= cc
PKGS       := libseccomp libcap jansson openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
           -Wno-unused-parameter -Wvla
ifeq ($(WERROR),1)
WARN    += -Werror
endif
HARDEN  := -fstack-protector-strong -fPIE -D_FORTIFY_SOURCE=3
OPT     ?= -O2 -g
CFLAGS  ?=
override CFLAGS += -std=gnu11 $(OPT) $(WARN) $(HARDEN) -Iinclude $(PKG_CFLAGS) \
           -DAB_VERSION='"$(VERSION)"' -DAB_DATADIR='"$(DATADIR)"' -D_GNU_SOURCE \
           -DAB_STATIC_LIBS=$(STATIC_LIBS)
override LDFLAGS += -pie -pthread -Wl,-z,relro,-z,now
# Relative relocations packed (DT_RELR; binutils 2.38, glibc 2.36) where the
# toolchain takes it: the table the loader reads at every start shrinks from
# ~500 KB to ~7 KB (the statically linked OpenSSL's pointers, mostly).
RELR_FLAG := $(shell printf 'int main(void){return 0;}\n' | $(CC) -x c - -pie \
               -Wl,-z,pack-relative-relocs -o /dev/null 2>/dev/null && \
               echo -Wl,-z,pack-relative-relocs)
override LDFLAGS += $(RELR_FLAG)
# libseccomp, libcap, jansson and OpenSSL are linked statically by default (the
# -dev packages ship the archives): it saves the dynamic linking of every
# start, OpenSSL's most of all (relocations and page faults in agentbox and
# in every process it forks; docs/performance.md has the figures).  The price:
# a security update of those packages needs a rebuild.  STATIC_LIBS=0 links
# them dynamically.
STATIC_LIBS ?= 1
ifeq ($(STATIC_LIBS),1)
LDLIBS  := -Wl,-Bstatic -lseccomp -lcap -ljansson -lssl -lcrypto -Wl,-Bdynamic
else
LDLIBS  := $(PKG_LIBS)
endif
LDLIBS  += -lm

# Kernel tracing (run --trace): CO-RE BPF built with clang and bpftool against
# this machine's kernel BTF, linked with libbpf.  Without any of them agentbox
# builds without tracing (AB_HAVE_TRACE=0) and --trace says so.  bpftool lives
# in /usr/sbin on Debian, off a normal user's PATH.
BPFTOOL     ?= $(firstword $(wildcard /usr/sbin/bpftool /sbin/bpftool) \
                 $(shell command -v bpftool 2>/dev/null))
BPF_CLANG   ?= $(firstword $(shell command -v clang 2>/dev/null) \
                 $(shell command -v clang-14 2>/dev/null))
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
BPF_ARCH    := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(firstword \
                 $(subst -, ,$(shell $(CC) -dumpmachine)))))
ifeq ($(origin AB_HAVE_TRACE),undefined)
AB_HAVE_TRACE := $(if $(and $(BPFTOOL),$(BPF_CLANG),$(wildcard $(VMLINUX_BTF)),\
                   $(shell pkg-config --exists libbpf && echo y)),1,0)
endif
ifeq ($(AB_HAVE_TRACE),1)
ifeq ($(STATIC_LIBS),1)
LDLIBS  += -Wl,-Bstatic -lbpf -lelf -lz -Wl,-Bdynamic
else
LDLIBS  += $(shell pkg-config --libs libbpf)
endif
endif

# The folders are the architecture (docs/architecture.md), listed from the
# bottom up: a folder uses only the folders above it in this list
# (tests/lint/layers.py checks it).  One concern per file; which process runs
# what is said at the top of each.
BASE_SRCS    := src/base/common.c src/base/loop.c src/base/json_pos.c src/base/sync.c
PARSE_SRCS   := src/parse/http.c src/parse/http_body.c src/parse/dns.c src/parse/tls.c \
                src/parse/wsframe.c src/parse/netpolicy.c src/parse/credfile.c \
                src/parse/gitconfig.c src/parse/ask.c
CONFIG_SRCS  := src/config/profile.c src/config/profile_keys.c src/config/profile_secrets.c \
                src/config/profile_values.c src/config/profile_vars.c src/config/profile_edit.c
KERNEL_SRCS  := src/kernel/host.c src/kernel/landlock.c src/kernel/seccomp.c src/kernel/seccomp_filter.c \
                src/kernel/seccomp_prog.c src/kernel/caps.c src/kernel/mediate.c \
                src/kernel/cgroup.c src/kernel/unixsock.c
# agentbox inside container engines (docs/containers.md)
KERNEL_SRCS  += src/kernel/container.c src/kernel/container_probe.c
CTR_UNIT_TESTS := container
CREDS_SRCS   := src/creds/ca.c src/creds/truststore.c src/creds/secrets.c src/creds/placeholder.c \
                src/creds/encode.c src/creds/scanset.c src/creds/rewrite.c src/creds/sources.c \
                src/creds/scan.c src/creds/phkey.c src/creds/systrust.c
PLAN_SRCS    := src/plan/plan.c src/plan/plan_mounts.c src/plan/plan_net.c src/plan/plan_landlock.c \
                src/plan/plan_gitcfg.c src/plan/learn.c src/plan/explain.c src/plan/explain_json.c \
                src/plan/plan_review.c src/plan/plan_guard.c
OBSERVE_SRCS := src/observe/audit.c src/observe/otlp.c src/observe/trace.c \
                src/observe/trace_event.c src/observe/supervise.c src/observe/supervise_exec.c \
                src/observe/supervise_rename.c src/observe/supervise_connect.c src/observe/supervise_learn.c src/observe/supervise_create.c src/observe/supervise_refusal.c \
                src/observe/supervise_path.c src/observe/report.c src/observe/report_event.c \
                src/observe/report_text.c src/observe/report_json.c src/observe/gitscan.c \
                src/observe/gitnest.c src/observe/review.c src/observe/review_apply.c
EGRESS_SRCS  := src/egress/proxy.c src/egress/pxconn.c src/egress/pxlog.c src/egress/pxctl.c \
                src/egress/pxhttp.c src/egress/pxbroker.c src/egress/pxtls.c src/egress/pxtunnel.c \
                src/egress/pxscan.c src/egress/dnsd.c src/egress/resolve.c src/egress/control.c \
                src/egress/broker.c src/egress/pxask.c
SANDBOX_SRCS := src/sandbox/sandbox.c src/sandbox/init.c src/sandbox/mount.c src/sandbox/mount_runtime.c src/sandbox/netns.c \
                src/sandbox/mount_walk.c src/sandbox/mount_idmap.c \
                src/sandbox/pty.c src/sandbox/termfilter.c src/sandbox/watch.c src/sandbox/cleanup.c \
                src/sandbox/settle.c src/sandbox/guard.c src/sandbox/asker.c src/sandbox/pathoffer.c src/sandbox/creator.c
ESCAPE_SRCS  := src/escape/canary.c src/escape/labinfo.c src/escape/result.c src/escape/report.c \
                src/escape/probes/registry.c src/escape/probes/runner.c \
                src/escape/probes/probe_fs.c src/escape/probes/probe_fsctl.c \
                src/escape/probes/probe_fsmount.c src/escape/probes/probe_fsutil.c \
                src/escape/probes/probe_harness.c src/escape/probes/probe_krn.c \
                src/escape/probes/probe_net.c src/escape/probes/probe_crd.c \
                src/escape/probes/probe_netrec.c src/escape/probes/probe_netlib.c \
                src/escape/probes/probe_secper.c src/escape/probes/probe_sysutil.c \
                src/escape/probes/probe_prc.c src/escape/probes/probe_secproc.c \
                src/escape/probes/probe_tty.c \
                src/escape/lab/harness.c src/escape/lab/lab.c src/escape/lab/judge.c
CLI_SRCS     := src/cli/cli.c src/cli/doctor.c src/cli/learn_run.c
LIB_SRCS := $(BASE_SRCS) $(PARSE_SRCS) $(CONFIG_SRCS) $(KERNEL_SRCS) $(CREDS_SRCS) $(PLAN_SRCS) \
            $(OBSERVE_SRCS) $(EGRESS_SRCS) $(SANDBOX_SRCS) $(ESCAPE_SRCS) $(CLI_SRCS)
MAIN_SRC := src/cli/main.c
UNIT_TESTS := common sync control profile plan learn compose landlock caps seccomp supervise gitscan loop pty explain cli host cgroup \
              http netpolicy dns tls ca truststore secheap rand secrets escape probe_fs probe_net trace \
              report credfile otlp unixsock wsframe termfilter gitconfig guard ask \
              review mediate

LIB_OBJS := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(MAIN_SRC:src/%.c=$(BUILD)/obj/%.o)
UNIT_BINS := $(UNIT_TESTS:%=$(BUILD)/tests/test_%) $(CTR_UNIT_TESTS:%=$(BUILD)/tests/test_%)

.PHONY: check-fuzz bench-proxy bench-reallink all deps check check-unit check-integration asan asan-unit fuzz \
        bench install uninstall clean lint format format-check containers check-containers

all: $(BUILD)/agentbox $(BUILD)/agentbox-ablate

$(BUILD)/obj/%.o: src/%.c $(wildcard include/agentbox/*.h src/*/*.h src/*/*/*.h) | $(BUILD)/obj
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj $(BUILD)/tests $(BUILD)/bpf:
	mkdir -p $@

# ---- kernel tracing: vmlinux.h -> trace.bpf.o -> trace.skel.h (src/observe/trace.c) ----
# (`bpftool gen object` links the object: BTF kept, DWARF dropped: 38 KB, not 650)
$(BUILD)/obj/observe/trace.o: override CFLAGS += -DAB_HAVE_TRACE=$(AB_HAVE_TRACE) -I$(BUILD)/bpf
ifeq ($(AB_HAVE_TRACE),1)
$(BUILD)/obj/observe/trace.o: $(BUILD)/bpf/trace.skel.h

$(BUILD)/bpf/vmlinux.h: | $(BUILD)/bpf
	$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/trace.bpf.o: bpf/trace.bpf.c src/observe/trace_event.h $(BUILD)/bpf/vmlinux.h
	$(BPF_CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror \
		-I$(BUILD)/bpf -Iinclude -c -o $(@:.o=.tmp.o) $<
	$(BPFTOOL) gen object $@ $(@:.o=.tmp.o)

$(BUILD)/bpf/trace.skel.h: $(BUILD)/bpf/trace.bpf.o
	$(BPFTOOL) gen skeleton $< name trace_bpf > $@.tmp && mv $@.tmp $@
endif

$(BUILD)/libagentbox.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/agentbox: $(MAIN_OBJ) $(BUILD)/libagentbox.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Test-only: the same program with AGENTBOX_TEST_ABLATE honoured (plan.h);
# never installed.  test-escape's ablation tests use it.
$(BUILD)/obj/main-ablate.o: src/cli/main.c $(wildcard include/agentbox/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS) -DAB_ABLATION -MMD -MP -c -o $@ $<

$(BUILD)/agentbox-ablate: $(BUILD)/obj/main-ablate.o $(BUILD)/libagentbox.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libagentbox.a tests/unit/unit.h tests/common/compose.h | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itests/unit -DAB_SRCDIR='"$(CURDIR)"' $(LDFLAGS) -o $@ $< \
		$(BUILD)/libagentbox.a $(LDLIBS) -lcmocka

# ---- dependencies (Debian packages only) ----
DEB_BUILD := build-essential pkg-config libseccomp-dev libcap-dev libjansson-dev libssl-dev \
             bpftool libbpf-dev libelf-dev zlib1g-dev clang clang-format
DEB_TEST  := libcmocka-dev python3 iproute2 util-linux git curl procps tmux strace zsh \
             libclang-rt-14-dev openjdk-17-jre-headless
DEB_BENCH := hyperfine bubblewrap
# the container engines' published default seccomp profile (podman, CRI-O):
# the base of the shipped ones (make containers)
DEB_CTR   := golang-github-containers-common
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
deps:
	@missing=""; for p in $(DEB_BUILD) $(DEB_TEST) $(DEB_BENCH) $(DEB_CTR); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "make deps: all Debian packages present"; fi

# ---- tests ----
# One step after the other (the last line is the integration tests' summary);
# `make -jN check` parallelises inside each step: builds, unit test binaries,
# fuzz targets (-O keeps each one's output together).  The integration
# tests run in parallel on their own (run.py -j, default CPUs + 1).
TIMED = t=$$(date +%s); $(MAKE) --no-print-directory $(1) && \
	echo "check: $(1) took $$(( $$(date +%s) - t )) s"
check:
	@$(call TIMED,lint)
	@$(call TIMED,check-unit)
	@$(call TIMED,check-fuzz)
	@$(MAKE) --no-print-directory check-integration

# The folders' order (tests/lint/layers.py): no include or call climbs it;
# and the C style (.clang-format) holds in every file.
lint: $(LIB_OBJS) $(MAIN_OBJ) format-check
	python3 tests/lint/layers.py --objs $(BUILD)/obj

# The C style (.clang-format).
CLANG_FORMAT ?= $(firstword $(shell command -v clang-format-14 clang-format 2>/dev/null))
FORMAT_FILES = $(shell git ls-files 'src/*.[ch]' 'include/*.h' 'tests/unit/*.[ch]' \
                 'tests/fuzz/*.c' 'tests/common/*.h' 'bpf/*.c' 2>/dev/null)
format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check:
	@test -n "$(CLANG_FORMAT)" || { echo "format-check: clang-format not found (make deps installs it)"; exit 1; }
	$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

# Every unit test binary runs (UNIT_JOBS at a time, each one's output printed
# whole when it ends); fails if any failed.
UNIT_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
check-unit: $(UNIT_BINS)
	@printf '%s\n' $(UNIT_BINS) | xargs -P $(UNIT_JOBS) -I{} sh -c \
		'{} > {}.out 2>&1; st=$$?; flock $(BUILD)/tests cat {}.out; exit $$st'

# Every parser of untrusted bytes, fuzzed briefly (CHECK_FUZZ_TIME seconds each);
# `make fuzz` runs them at length.  Needs clang (make deps installs it).
CHECK_FUZZ_TIME ?= 3
check-fuzz:
	@if command -v clang-14 >/dev/null || command -v clang >/dev/null; then \
		mkdir -p build-fuzz; \
		$(MAKE) -O -C tests/fuzz BUILD=$(CURDIR)/build-fuzz FUZZ_TIME=$(CHECK_FUZZ_TIME) run \
			> build-fuzz/check.log 2>&1; st=$$?; \
		grep -oE "\./fuzz_[a-z]+ |^Done [0-9]+ runs in [0-9]+ s" build-fuzz/check.log | paste -d" " - - ; \
		if [ $$st != 0 ]; then tail -40 build-fuzz/check.log; exit 1; fi; \
	else echo "check-fuzz: SKIPPED (no clang; run make deps)"; fi

check-integration: $(BUILD)/agentbox $(BUILD)/agentbox-ablate
	@# the pinned harnesses of the end-to-end tests, installed before any
	@# test's timeout runs (a no-op with a warm cache; failures reappear
	@# in the tests themselves)
	-python3 tests/integration/prefetch.py --binary $(BUILD)/agentbox
	python3 tests/integration/run.py --binary $(BUILD)/agentbox

# ASan+UBSan build of the same suites in build-asan/.
ASAN_MAKE = $(MAKE) BUILD=build-asan HARDEN="-fPIE" \
	OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
asan:
	$(ASAN_MAKE) check
asan-unit:
	$(ASAN_MAKE) check-unit

fuzz:
	$(MAKE) -C tests/fuzz BUILD=$(CURDIR)/build-fuzz run

bench: $(BUILD)/agentbox
	bash bench/startup.sh $(BUILD)/agentbox
	bash bench/record.sh $(BUILD)/agentbox
	bash bench/unixsock.sh $(BUILD)/agentbox
	bash bench/connect.sh $(BUILD)/agentbox
	python3 bench/syscall.py --agentbox $(BUILD)/agentbox --json $(BUILD)/bench/syscall.json
	@if [ "$$(id -u)" = 0 ]; then python3 bench/proxy.py --agentbox $(BUILD)/agentbox --json $(BUILD)/bench/proxy.json; \
	else echo "bench: proxy benchmark skipped (needs root; run make bench-proxy as root)"; fi
	python3 bench/reallink.py --agentbox $(BUILD)/agentbox --json $(BUILD)/bench/reallink.json

# The egress proxy against direct connections (latency, HTTPS, bulk, 2,000 tunnels).
bench-proxy: $(BUILD)/agentbox
	python3 bench/proxy.py --agentbox $(BUILD)/agentbox --json $(BUILD)/bench/proxy.json

# The egress proxy on a shaped link (netns, veth, tbf, a delay line): root.
bench-reallink: $(BUILD)/agentbox
	python3 bench/reallink.py --agentbox $(BUILD)/agentbox --json $(BUILD)/bench/reallink.json

# ---- install ----
# ---- running inside container engines (docs/containers.md) ----
# The seccomp profiles are the engines' defaults plus the calls agentbox's
# set-up needs (contrib/containers/gen-seccomp.py).  Docker's default is
# compiled into dockerd: DOCKER_SECCOMP_BASE=moby's default.json uses it.
CTR_SECCOMP_BASE    ?= /usr/share/containers/seccomp.json
DOCKER_SECCOMP_BASE ?= $(CTR_SECCOMP_BASE)
CTR_PROFILES := $(BUILD)/containers/podman-seccomp.json $(BUILD)/containers/docker-seccomp.json
containers: $(CTR_PROFILES)

$(BUILD)/containers/podman-seccomp.json: contrib/containers/gen-seccomp.py
	@mkdir -p $(dir $@)
	python3 contrib/containers/gen-seccomp.py --engine podman --base $(CTR_SECCOMP_BASE) -o $@

$(BUILD)/containers/docker-seccomp.json: contrib/containers/gen-seccomp.py
	@mkdir -p $(dir $@)
	python3 contrib/containers/gen-seccomp.py --engine docker --base $(DOCKER_SECCOMP_BASE) -o $@

# agentbox in podman and Docker for real (skips, saying why, without them)
check-containers: $(BUILD)/agentbox containers
	sh contrib/containers/check.sh $(BUILD)

install: $(BUILD)/agentbox containers
	install -Dm755 $(BUILD)/agentbox $(DESTDIR)$(BINDIR)/agentbox
	install -d $(DESTDIR)$(DATADIR)/containers $(DESTDIR)$(DATADIR)/apparmor
	install -m644 $(CTR_PROFILES) contrib/containers/agentbox-container \
		contrib/containers/Dockerfile $(DESTDIR)$(DATADIR)/containers/
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g' contrib/apparmor/agentbox.in \
		> $(DESTDIR)$(DATADIR)/apparmor/agentbox
	install -d $(DESTDIR)$(DATADIR)/profiles
	install -m644 $(filter-out profiles/schema.json,$(wildcard profiles/*.json)) \
		$(DESTDIR)$(DATADIR)/profiles/
	install -m644 profiles/schema.json $(DESTDIR)$(DATADIR)/schema.json
	install -Dm644 man/agentbox.1 $(DESTDIR)$(MANDIR)/man1/agentbox.1
	install -Dm644 man/agentbox-profile.5 $(DESTDIR)$(MANDIR)/man5/agentbox-profile.5
	install -Dm644 completions/agentbox.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/agentbox
	install -Dm644 completions/_agentbox $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_agentbox

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/agentbox $(DESTDIR)$(MANDIR)/man1/agentbox.1 \
		$(DESTDIR)$(MANDIR)/man5/agentbox-profile.5 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/agentbox \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_agentbox
	rm -rf $(DESTDIR)$(DATADIR)

clean:
	rm -rf build build-asan build-clang build-fuzz

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d)
