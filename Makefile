# nyx-exec: plain GNU make, no configure step.  See README.md.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
PKG_CONFIG ?= pkg-config
O ?= build
WERROR ?= -Werror

# V=1 shows the full compiler lines.
V ?= 0
ifeq ($(V),1)
Q :=
QCC = :
else
Q := @
QCC = printf '  %-6s %s\n'
endif

TOOLS := nyx-route-inspect nyx-route-converge code-exec exec-status audit-replay codex-exec
DAEMONS := nyx-sandboxd
PROGS := $(TOOLS) $(DAEMONS)
PKGS := libcurl yaml-0.1 nettle sqlite3 libseccomp
SRV_PKGS := libmicrohttpd

# Debian 12's libjq 1.6 ships no pkg-config file: fall back to -ljq.
JQ_LIBS ?= $(shell $(PKG_CONFIG) --libs libjq 2>/dev/null || echo -ljq)

ifeq ($(filter deps clean lint-shell help,$(MAKECMDGOALS)),)
ifneq ($(shell $(PKG_CONFIG) --exists $(PKGS) $(SRV_PKGS) && echo yes),yes)
$(error missing build dependencies ($(PKGS) $(SRV_PKGS)); run 'sudo make deps')
endif
endif

NYX_CPPFLAGS := -Ilib -Icmd -D_GNU_SOURCE
NYX_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Wshadow -Wformat=2 \
	-Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter \
	-fstack-protector-strong $(WERROR) \
	$(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
# Full RELRO: symbols bound at start-up, the GOT read-only before main
# (and nothing bound lazily on a local run's path).
NYX_LDFLAGS := -Wl,-z,relro -Wl,-z,now
# libcurl is not linked: lib/nyx_curl.c opens it on the first HTTP
# exchange (its headers are enough here).
# libseccomp compiles the sandbox's filter at build time only
# (tools/gen-seccomp.c): the programs carry the result, not the library.
# SQLite is not linked either: lib/nyx_sqlite.c opens it with the first
# state file, which a local run does beside bubblewrap's set-up.
LIBS := $(shell $(PKG_CONFIG) --libs \
	$(filter-out libcurl libseccomp sqlite3,$(PKGS)) 2>/dev/null) $(JQ_LIBS)
# libmicrohttpd is nyx-sandboxd's alone: only its own part compiles and
# links with it.
SRV_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(SRV_PKGS) 2>/dev/null)
SRV_LIBS := $(shell $(PKG_CONFIG) --libs $(SRV_PKGS) 2>/dev/null) -lpthread

# Three layers: libnyx.a (lib/, the domain, never prints), libtool.a
# (cmd/tool/, the program layer: options, records, reporting) and the
# server's own part (cmd/nyx-sandboxd/, built only into nyx-sandboxd and
# the unit tests named test_sandboxd_*).
LIBSRC := $(wildcard lib/nyx_*.c)
LIBOBJ := $(patsubst %.c,$(O)/obj/%.o,$(LIBSRC))
TOOLSRC := $(wildcard cmd/tool/*.c)
TOOLOBJ := $(patsubst %.c,$(O)/obj/%.o,$(TOOLSRC))
SRVSRC := $(wildcard cmd/nyx-sandboxd/*.c)
SRVOBJ := $(patsubst %.c,$(O)/obj/%.o,$(SRVSRC))
UNITSRC := $(wildcard tests/unit/test_*.c)
UNITBIN := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNITSRC))

all: $(PROGS:%=$(O)/bin/%) $(UNITBIN)

# The seccomp filter, compiled by a build-time tool (with the build
# machine's compiler and no sanitizer: it only prints a header).
HOSTCC ?= cc
$(O)/gen/gen-seccomp: tools/gen-seccomp.c
	@mkdir -p $(@D)
	@$(QCC) HOSTCC $@
	$(Q)$(HOSTCC) -std=c11 -O2 -Wall -Wextra -Werror \
	    $(shell $(PKG_CONFIG) --cflags libseccomp 2>/dev/null) -o $@ $< \
	    $(shell $(PKG_CONFIG) --libs libseccomp 2>/dev/null)
$(O)/gen/nyx_seccomp_bpf.h: $(O)/gen/gen-seccomp
	@$(QCC) GEN $@
	$(Q)$< >$@.tmp && mv $@.tmp $@
$(O)/obj/lib/nyx_sandbox_guard.o: $(O)/gen/nyx_seccomp_bpf.h
$(O)/obj/lib/nyx_sandbox_guard.o: NYX_CPPFLAGS += -I$(O)/gen

$(O)/obj/%.o: %.c
	@mkdir -p $(@D)
	@$(QCC) CC $<
	$(Q)$(CC) $(NYX_CPPFLAGS) $(CPPFLAGS) $(NYX_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(SRVOBJ) $(O)/obj/cmd/nyx-sandboxd.o: NYX_CFLAGS += $(SRV_CFLAGS)

$(O)/libnyx.a: $(LIBOBJ)
	@$(QCC) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(O)/libtool.a: $(TOOLOBJ)
	@$(QCC) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(O)/libsandboxd.a: $(SRVOBJ)
	@$(QCC) AR $@
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(O)/bin/nyx-sandboxd: $(O)/obj/cmd/nyx-sandboxd.o $(O)/libsandboxd.a \
    $(O)/libtool.a $(O)/libnyx.a
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CFLAGS) $(CFLAGS) $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $^ $(SRV_LIBS) $(LIBS) $(LDLIBS)

$(O)/bin/%: $(O)/obj/cmd/%.o $(O)/libtool.a $(O)/libnyx.a
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CFLAGS) $(CFLAGS) $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS) $(LDLIBS)

$(O)/tests/test_sandboxd_%: $(O)/obj/tests/unit/test_sandboxd_%.o \
    $(O)/libsandboxd.a $(O)/libnyx.a
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CFLAGS) $(CFLAGS) $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $^ $(SRV_LIBS) $(LIBS) $(LDLIBS)

$(O)/tests/%: $(O)/obj/tests/unit/%.o $(O)/libnyx.a
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CFLAGS) $(CFLAGS) $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS) $(LDLIBS)

# bench/exec.sh's wrappers: bench/wrap.c bare, and linked exactly as the
# programs are, with their libraries kept (see bench/wrap.c).
$(O)/bench/wrap-libs: WRAP_LIBS = -Wl,--no-as-needed $(LIBS) $(LDLIBS)
$(O)/bench/wrap $(O)/bench/wrap-libs: bench/wrap.c
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CPPFLAGS) $(NYX_CFLAGS) $(CFLAGS) $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $< \
	    $(WRAP_LIBS)

-include $(LIBOBJ:.o=.d) $(TOOLOBJ:.o=.d) $(SRVOBJ:.o=.d) \
    $(PROGS:%=$(O)/obj/cmd/%.d) $(UNITSRC:tests/unit/%.c=$(O)/obj/tests/unit/%.d)
.SECONDARY:

# ---- tests ----
# The one test command: the bats suites over TAP, summarised by prove.
PROVE ?= prove
JOBS ?= 2
check: all
	NYX_BIN=$(abspath $(O)/bin) NYX_TESTBIN=$(abspath $(O)/tests) \
	    $(PROVE) -j$(JOBS) --exec 'bats --tap' tests/*.bats

# The seeded chaos test of the durable path with more trials than the
# suite's smoke (tests/chaos.bats runs 6): make chaos N=200 SEED=42
N ?= 200
SEED ?=
FIRST ?= 1
chaos: all
	NYX_BIN=$(abspath $(O)/bin) NYX_TESTBIN=$(abspath $(O)/tests) \
	    CHAOS_N=$(N) CHAOS_SEED=$(SEED) CHAOS_FIRST=$(FIRST) \
	    bats --tap tests/chaos.bats

# The README's test command: lint, the fuzz corpora replayed, the suite, and
# the suite again under ASan (last, so prove's summary ends the output).
test: lint fuzz-replay check asan

# ---- fuzzing (tests/fuzz/, libFuzzer) ----
# make fuzz FUZZ_SECONDS=3600 runs each target that long; what it finds
# goes to build/fuzz/corpus/ (new inputs) and build/fuzz/artifacts/
# (crashes).  make fuzz-replay runs every checked-in seed once.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_O := build/fuzz
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
fuzzers: $(FUZZ_TARGETS:%=$(O)/fuzz/%)
$(O)/fuzz/%: $(O)/obj/tests/fuzz/%.o $(O)/libsandboxd.a $(O)/libnyx.a
	@mkdir -p $(@D)
	@$(QCC) LD $@
	$(Q)$(CC) $(NYX_CFLAGS) $(CFLAGS) -fsanitize=fuzzer $(NYX_LDFLAGS) $(LDFLAGS) -o $@ $^ \
	    $(SRV_LIBS) $(LIBS) $(LDLIBS)
fuzz-build:
	$(MAKE) O=$(FUZZ_O) CC=clang CFLAGS='$(FUZZ_CFLAGS)' fuzzers
fuzz: fuzz-build
	@mkdir -p $(FUZZ_O)/artifacts
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_O)/corpus/$$t; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    $(FUZZ_O)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_O)/artifacts/$$t- \
	        $(FUZZ_O)/corpus/$$t tests/fuzz/corpus/$$t 2>$(FUZZ_O)/$$t.log \
	        || { tail -40 $(FUZZ_O)/$$t.log; exit 1; }; \
	    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|cov: ' \
	        $(FUZZ_O)/$$t.log | tail -3; \
	done
fuzz-replay: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	    n=$$(ls tests/fuzz/corpus/$$t | wc -l); \
	    $(FUZZ_O)/fuzz/$$t -runs=0 tests/fuzz/corpus/$$t \
	        >$(FUZZ_O)/$$t.replay.log 2>&1 \
	        || { tail -40 $(FUZZ_O)/$$t.replay.log; exit 1; }; \
	    echo "fuzz-replay: $$t: $$n seeds, no crash"; \
	done

ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all
asan:
	$(MAKE) O=build/asan CFLAGS='$(ASAN_FLAGS) $(CFLAGS)' \
	    LDFLAGS='-fsanitize=address,undefined $(LDFLAGS)' check

# Every test again with each tool run under valgrind (wrapper scripts);
# a child before its exec (valgrind runs the sandbox's vfork as a fork)
# is not reported, and no vgdb FIFOs are made (a kill -9 would leave
# them in TMPDIR).
valgrind-check: all
	@mkdir -p $(O)/valgrind-bin
	@for p in $(PROGS); do \
	    printf '#!/bin/sh\nexec valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --child-silent-after-fork=yes --vgdb=no %s "$$@"\n' \
	        "$(abspath $(O)/bin)/$$p" > $(O)/valgrind-bin/$$p; \
	    chmod +x $(O)/valgrind-bin/$$p; done
	NYX_BIN=$(abspath $(O)/valgrind-bin) NYX_TESTBIN=$(abspath $(O)/tests) \
	    NYX_UNDER_VALGRIND=1 $(PROVE) -j$(JOBS) --exec 'bats --tap' tests/*.bats

# ---- lint ----
BANNED := sprintf|vsprintf|strcpy|strcat|strncat|strncpy|gets|strtok|atoi|atol|atof|system|popen|signal
CSRC := $(wildcard cmd/*.c cmd/*/*.c cmd/*/*.h lib/*.c lib/*.h tests/unit/*.c \
	tests/unit/*.h tests/fuzz/*.c tests/fuzz/*.h tests/fixtures/*/*.c bench/*.c \
	tools/*.c)
SHSRC := $(wildcard tests/helpers/*.bash bench/*.sh examples/*.sh .ci/run) completions/bash/nyx
lint:
	clang-format --dry-run -Werror $(CSRC)
	cppcheck -q --error-exitcode=1 --std=c11 --enable=warning,portability \
	    --inline-suppr --suppress=missingIncludeSystem -Ilib -Icmd $(CSRC)
	shellcheck -s bash $(SHSRC)
	mandoc -Tlint -Wwarning man/*
	@if grep -nE '(^|[^_.>[:alnum:]])($(BANNED))[[:space:]]*\(' $(CSRC) | grep -v 'lint-ok'; then \
	    echo 'banned function used (see STYLE.md)'; exit 1; fi
	@# lib/ is the domain: it never writes to stdout, never exits, never
	@# includes the program layer (nyx_log is its one voice, on stderr)
	@if grep -nE '(^|[^_.[:alnum:]])(printf|puts|putchar|exit)[[:space:]]*\(|[(,][[:space:]]*stdout[[:space:]]*[,)]|#include "(tool|nyx-sandboxd)/' \
	    lib/*.c lib/*.h | grep -v 'lint-ok'; then \
	    echo 'lib/ writes to stdout, exits or reaches into cmd/ (see STYLE.md)'; exit 1; fi
	@echo lint clean

# ---- demo: the main job on the embedded default (a local nyx-sandboxd) ----
demo: all
	@sh examples/demo.sh $(abspath $(O)/bin)

# ---- dependencies (Debian 12) ----
DEBS := build-essential pkg-config libcurl4-openssl-dev libjq-dev libonig-dev \
	libyaml-dev nettle-dev libsqlite3-dev libmicrohttpd-dev libseccomp-dev \
	bubblewrap \
	bats bats-assert bats-support jq curl python3 nodejs node-typescript sqlite3 \
	mandoc cppcheck clang libclang-rt-14-dev \
	shellcheck clang-format valgrind zsh strace
deps:
	@if [ "$$(id -u)" = 0 ]; then \
	    apt-get update && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y --no-install-recommends $(DEBS); \
	else echo "run as root: apt-get install -y $(DEBS)"; fi

# ---- install ----
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 0755 $(PROGS:%=$(O)/bin/%) $(DESTDIR)$(BINDIR)
	install -m 0644 $(wildcard man/*.1) $(DESTDIR)$(MANDIR)/man1
	install -m 0644 man/nyx.7 $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(wildcard man/*.8) $(DESTDIR)$(MANDIR)/man8
	install -m 0644 completions/bash/nyx $(DESTDIR)$(BASHCOMPDIR)/nyx
	for p in $(PROGS); do ln -sf nyx $(DESTDIR)$(BASHCOMPDIR)/$$p; done
	install -m 0644 completions/zsh/_nyx $(DESTDIR)$(ZSHCOMPDIR)/_nyx

uninstall:
	rm -f $(PROGS:%=$(DESTDIR)$(BINDIR)/%)
	rm -f $(patsubst man/%,$(DESTDIR)$(MANDIR)/man1/%,$(wildcard man/*.1))
	rm -f $(DESTDIR)$(MANDIR)/man7/nyx.7
	rm -f $(patsubst man/%,$(DESTDIR)$(MANDIR)/man8/%,$(wildcard man/*.8))
	rm -f $(DESTDIR)$(BASHCOMPDIR)/nyx $(PROGS:%=$(DESTDIR)$(BASHCOMPDIR)/%)
	rm -f $(DESTDIR)$(ZSHCOMPDIR)/_nyx

clean:
	rm -rf build

.PHONY: all test check chaos fuzz fuzz-build fuzz-replay fuzzers asan valgrind-check lint demo deps install uninstall clean
