# curlguard - build, test, demo, install.  See README.md.
#
#   make              build/libcurlguard.so and build/curlguard
#   make check        the whole test suite (unit + integration); installs missing deps
#   make check-asan   the same suite with ASan+UBSan builds
#   make deb          build/curlguard_<version>_amd64.deb (scripts/make-deb); deb-lint: lintian
#   make check-peers  curl's and pycurl's own test suites, plain vs guarded (issue 11);
#                     PEERS=curl|pycurl PEER_MODES=plain,one,defaults PEER_TESTS="554 587"
#   make check-php-peer  PHP's ext/curl phpt tests, plain vs guarded (issue 14)
#   make demo         a real batch of curl calls through the guard against the mock provider
#   make install      PREFIX=/usr/local (DESTDIR honoured); make uninstall
#   make V=1 ...      show the full compiler commands (default: one short line per file)

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
CC ?= cc
PYTHON ?= /usr/bin/python3
SCDOC ?= scdoc
MANDIR ?= $(PREFIX)/share/man

# Quiet build, as curl's and the kernel's: one short line per target ("  CC      x.o");
# V=1 prints the full commands instead.
V ?= 0
ifeq ($(V),1)
Q :=
say = @:
else
Q := @
say = @printf '  %-7s %s\n'
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
# The interposer must know deprecated options too (CURLOPT_PUT, PROGRESSFUNCTION, ...).
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -DCURL_DISABLE_DEPRECATION -O2 -g $(WARN)
SAN_FLAGS :=
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
  -fno-sanitize-recover=undefined,float-cast-overflow
endif
ifeq ($(TSAN),1)
SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
endif
CFLAGS ?=

# Profile-guided build of the library's objects (issue 16; README "Profile-guided build"):
# the objects are first compiled with -fprofile-generate, scripts/pgo-train runs real hosts
# with the library they make against the mock provider, and the objects are then compiled
# with that profile: gcc lays out each function's common path as fall-through code, which
# halves the taken branches a request runs in the library (on a host whose own code keeps
# the branch predictor cold, such as curl, each costs a restart of instruction fetch).  The
# code and its behaviour are the same; only its layout and inlining differ.  PGO=0 builds
# without it (faster rebuilds while editing); sanitizer, fuzzer and clang builds never use
# it.  A failed training run builds without a profile and says so: never a failed build.
PGO ?= 1
ifneq ($(filter 1,$(SAN) $(TSAN))$(findstring sanitize,$(CFLAGS))$(findstring clang,$(CC)),)
override PGO := 0
endif
ifeq ($(PGO),1)
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),)
override PGO := 0
endif
endif
PGO_DIR := $(BUILD)/pgo
LIB_PGO_FLAGS :=
PGO_STAMP :=
ifeq ($(PGO),gen)
LIB_PGO_FLAGS := -fprofile-generate -fprofile-update=atomic
else ifeq ($(PGO),1)
# A source saved while the training ran no longer matches its profile: gcc then compiles
# the functions that changed without it (a warning, not an error), and the stamp, dated
# from the training's start, is older than that source: the next make trains again.
LIB_PGO_FLAGS := -fprofile-use -fprofile-partial-training -Wno-missing-profile \
  -Wno-error=coverage-mismatch
# ... but without the loop unrolling and peeling -fprofile-use also turns on: the loops the
# library runs a request go round a few times, and their copies cost more code lines than
# the jumps they save (issue 16; curl -K, log off: 471 -> 458 code lines a request, taken
# branches 170 -> 174; SSE answer 626 -> 592; prof.py figures, README "Profile-guided
# build").  The hottest loops also say so themselves (#pragma GCC unroll 1, digest.c's
# options), for a build given -funroll-loops in CFLAGS.
LIB_PGO_FLAGS += -fno-unroll-loops -fno-peel-loops
PGO_STAMP := $(BUILD)/obj/pgo.stamp
# ... and link-time optimisation of the library (issue 16): a request runs some 110 of the
# library's functions in 25 files; across files gcc can then inline the small ones and lay
# out the rest by the profile (under curl, log off: 147 call sites a request instead of
# 206, +19.6k instructions instead of +22.0k; README "Profile-guided build").  The
# objects are "fat" (their ordinary code beside gcc's intermediate one):
# the CLI, the unit tests and the benches link them as ordinary objects (-fno-lto), only
# libcurlguard.so is optimised as a whole.  loader.c, whose entry points are top-level asm
# naming its functions, stays out of it.  A warning of the whole-library pass (it sees
# inlining that depends on the profile) is printed, not fatal: every file has already been
# compiled with -Werror.
LIB_PGO_FLAGS += -flto -ffat-lto-objects
LIB_LTO_LINK := -flto=auto -Wno-error
$(BUILD)/obj/loader.o: LIB_PGO_FLAGS += -fno-lto
endif
# Every other compile and link, in every build: fat objects a PGO build left behind are
# linked as ordinary ones by a later PGO=0 make (no whole-library pass, no LTO warning).
LTO_OFF := -fno-lto
# LTO_OFF before CFLAGS: a -flto of the caller's still applies to everything.
ALL_CFLAGS := $(BASE_CFLAGS) $(SAN_FLAGS) $(LTO_OFF) $(CFLAGS)

# The compiler and flags the build tree was made with, in $(FLAGS_FILE): a make with others
# (CC, CFLAGS, PGO=0 after PGO=1, ...) in the same BUILD rewrites it, and everything
# compiled from a source is made again (the objects are not newer than the Makefile's
# variables).  Written when the Makefile is read, only when it differs; never by the
# training's PGO=gen make, whose objects the training removes, nor, once the file exists,
# by a make of only install, uninstall, deb or clean: those take the tree as it was built
# (the tests' `make install` and `make deb` run without the caller's MAKEFLAGS, and must
# not rebuild the library the other tests are running).
FLAGS_FILE := $(BUILD)/obj/flags
FLAGS_NOW := $(CC) $(ALL_CFLAGS) $(LIB_PGO_FLAGS) $(LIB_LTO_LINK)
ifneq ($(PGO),gen)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean install uninstall deb deb-lint,$(MAKECMDGOALS)),all)$(if $(wildcard $(FLAGS_FILE)),,none yet),)
ifneq ($(file <$(FLAGS_FILE)),$(FLAGS_NOW))
$(shell mkdir -p $(BUILD)/obj)
$(file >$(FLAGS_FILE),$(FLAGS_NOW))
endif
endif
endif

LIB_SRCS := src/shim.c src/lib.c src/handle.c src/optval.c src/config.c src/guard.c \
            src/attempt.c src/classify.c src/policy.c src/backoff.c src/record.c \
            src/body.c src/admit.c src/state.c src/limiter.c src/window.c src/breaker.c src/budget.c src/fallback.c src/ratelimit.c src/digest.c src/repeat.c src/usage.c src/rng.c src/url.c src/clock.c src/log.c src/price.c src/price-litellm.c \
            src/tally.c src/loader.c src/multi.c src/shim-multi.c
# The cached pid and start time (issue 16): state.c, limiter.c, breaker.c, budget.c use it.
LIB_SRCS += src/proc.c
# Fleets (issue 15): the shared-state interface's back ends; hiredis linked in statically
# with its symbols hidden, so a host's own hiredis is not disturbed (README "Fleets").
LIB_SRCS += src/shared-mmap.c src/shared-redis.c
HIREDIS_A ?= /usr/lib/x86_64-linux-gnu/libhiredis.a
LIB_OBJS := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o)
# Everything but the shims: linked into the unit tests.
# ... and without loader.c too: its dlopen/dlsym would interpose the test programs' own.
CORE_OBJS := $(filter-out $(BUILD)/obj/shim.o $(BUILD)/obj/shim-multi.o $(BUILD)/obj/loader.o,$(LIB_OBJS))
LIB_LDLIBS := -ldl -lpthread -lcjson -lm -lz
LIB_LDLIBS += -Wl,--exclude-libs,libhiredis.a $(HIREDIS_A)

# `curlguard report` without its command line: also linked into tests/unit/test-report.c.
REPORT_SRCS := cli/report.c cli/report-rec.c cli/report-hist.c cli/report-map.c \
               cli/report-alert.c cli/report-out.c cli/report-series.c cli/report-svg.c \
               cli/report-html.c
REPORT_OBJS := $(REPORT_SRCS:cli/%.c=$(BUILD)/obj/cli/%.o)
# `stat --prometheus` and `exporter` (issue 17): all but exporter.c (the server loop) also
# linked into tests/unit/test-prom.c.
METRICS_SRCS := cli/prom.c cli/metrics.c cli/exporter-http.c
METRICS_OBJS := $(METRICS_SRCS:cli/%.c=$(BUILD)/obj/cli/%.o)
CLI_SRCS := cli/main.c cli/run.c cli/plan.c cli/stat.c cli/report-cli.c cli/prices.c $(REPORT_SRCS) \
            $(METRICS_SRCS) cli/exporter.c
# The library parts the CLI shares (pure, or file-only: nothing that touches libcurl).
CLI_CORE := $(addprefix $(BUILD)/obj/,backoff.o config.o log.o state.o limiter.o repeat.o window.o breaker.o budget.o fallback.o url.o price.o price-litellm.o tally.o)
CLI_CORE += $(BUILD)/obj/proc.o
CLI_OBJS := $(CLI_SRCS:cli/%.c=$(BUILD)/obj/cli/%.o)
CLI_CORE += $(BUILD)/obj/shared-redis.o $(BUILD)/obj/shared-mmap.o $(BUILD)/obj/clock.o

# A training stopped half-way (make interrupted) leaves instrumented objects, newer than
# their sources, behind its marker: they are removed before any other build uses them.
ifneq ($(PGO),gen)
ifneq ($(wildcard $(BUILD)/obj/pgo.gen),)
$(shell rm -f $(LIB_OBJS) $(BUILD)/obj/pgo.stamp $(BUILD)/obj/pgo.gen)
endif
endif
# After a failed training the next PGO build trains again.
ifeq ($(PGO),1)
ifneq ($(wildcard $(BUILD)/obj/pgo.failed),)
$(shell rm -f $(BUILD)/obj/pgo.stamp $(BUILD)/obj/pgo.failed)
endif
endif

UNIT_SRCS := $(wildcard tests/unit/test-*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all check check-unit check-integration check-asan check-tsan check-soak demo install uninstall clean deps bench
.PHONY: check-peers check-peers-report deps-peers

# The man pages (doc/*.scd, scdoc(5)): curlguard(1) and libcurlguard(7).
MAN_PAGES := $(BUILD)/curlguard.1 $(BUILD)/libcurlguard.7

all: $(BUILD)/libcurlguard.so $(BUILD)/curlguard $(BUILD)/prices.json $(BUILD)/tests/cghost \
  $(BUILD)/tests/rsshost $(BUILD)/tests/cgmulti $(MAN_PAGES)

$(FLAGS_FILE): ;

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) $(PGO_STAMP) $(FLAGS_FILE) | $(BUILD)/obj
	$(say) CC $@
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_PGO_FLAGS) -fPIC -fvisibility=hidden -c -o $@ $<
# An object without the profile: the next PGO build trains again.
ifeq ($(PGO),0)
	$(Q)rm -f $(BUILD)/obj/pgo.stamp
endif

# The profile (PGO above): the library's objects are first compiled with -fprofile-generate
# in their own place (gcc names a profile after its object and reads it from beside the
# object, so both compiles must write the same X.o), linked into $(PGO_DIR)/libcurlguard.so,
# and trained; the parent make then compiles them again with the profile (the stamp is newer
# than every object).  The stamp gets the time the training started: a source saved
# meanwhile is newer, and the next make trains again; so does the next make after a failed
# training (pgo.failed).  pgo.gen marks the instrumented objects while they exist.
# "profile written" in train.log (which .ci/run requires) is make's, once the profiles are
# beside the objects.
$(BUILD)/obj/pgo.stamp: $(LIB_SRCS) $(wildcard src/*.h) scripts/pgo-train scripts/mock-provider \
  $(BUILD)/bench/batch-host $(PGO_DIR)/prices.json $(FLAGS_FILE) | $(BUILD)/obj
	$(say) PGO "$(PGO_DIR)/libcurlguard.so (instrumented; training: scripts/pgo-train)"
	$(Q)mkdir -p $(PGO_DIR) && touch $(PGO_DIR)/started $(BUILD)/obj/pgo.gen
	$(Q)rm -f $(LIB_OBJS) $(BUILD)/obj/*.gcda $(PGO_DIR)/train.log
	$(Q)$(MAKE) --no-print-directory PGO=gen $(PGO_DIR)/libcurlguard.so
	$(Q)ok=0; if $(PYTHON) scripts/pgo-train $(PGO_DIR)/libcurlguard.so \
	  $(BUILD)/bench/batch-host >$(PGO_DIR)/train.log 2>&1; then \
	  if test -s $(BUILD)/obj/guard.gcda && test -s $(BUILD)/obj/shim.gcda; then ok=1; else \
	  echo "the training ran, but no profile reached $(BUILD)/obj (GCOV_PREFIX set?)" \
	    >>$(PGO_DIR)/train.log; fi; fi; \
	if [ $$ok = 1 ]; then touch -r $(PGO_DIR)/started $@; \
	  echo "make: profile written: $$(ls $(BUILD)/obj/*.gcda | wc -l) files" >>$(PGO_DIR)/train.log; \
	else rm -f $(BUILD)/obj/*.gcda; why=$$(tail -n 1 $(PGO_DIR)/train.log 2>/dev/null); \
	  printf 'make: building the library without a profile: %s\n' \
	    "$${why:-scripts/pgo-train failed without a word}" >&2; \
	  touch -r $(PGO_DIR)/started $@ $(BUILD)/obj/pgo.failed; fi
	$(Q)rm -f $(LIB_OBJS) $(BUILD)/obj/pgo.gen

# The shipped price table beside the library and the CLI.  A build in the tree finds
# data/prices.json itself (../data from build/); a build directory elsewhere (make
# BUILD=/tmp/b) finds this copy (src/guard.c cg__prices_init, cli/prices.c
# cg__shipped_table), and so does the training library in $(PGO_DIR): the profile then
# holds the pricing of every record, which it lacked (the code a request runs to price its
# record was laid out as never run: issue 16).
$(BUILD)/prices.json $(PGO_DIR)/prices.json: data/prices.json
	@mkdir -p $(@D)
	$(say) CP $@
	$(Q)cp $< $@

# The instrumented library of the training run (PGO=gen only).
$(PGO_DIR)/libcurlguard.so: $(LIB_OBJS)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_PGO_FLAGS) -shared -fPIC -Wl,-z,defs -Wl,--as-needed \
	  -Wl,-soname,libcurlguard.so -o $@ $(LIB_OBJS) $(LIB_LDLIBS)

$(BUILD)/obj/cli/%.o: cli/%.c $(wildcard cli/*.h) $(wildcard src/*.h) $(FLAGS_FILE) | $(BUILD)/obj/cli
	$(say) CC $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -c -o $@ $<

# The one place the version is written: `curlguard version` and the Debian package's upstream
# version (packaging/deb/changelog must have a top entry VERSION-N; scripts/make-deb checks).
VERSION := $(shell cat $(dir $(lastword $(MAKEFILE_LIST)))VERSION 2>/dev/null)
$(BUILD)/obj/cli/main.o: VERSION
$(BUILD)/obj/cli/main.o: ALL_CFLAGS += -DCG_VERSION='"$(VERSION)"'

$(BUILD)/libcurlguard.so: $(LIB_OBJS) $(FLAGS_FILE)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_PGO_FLAGS) $(LIB_LTO_LINK) -shared -fPIC -Wl,-z,defs -Wl,--as-needed -Wl,-soname,libcurlguard.so \
	  -o $@ $(LIB_OBJS) $(LIB_LDLIBS)

$(BUILD)/curlguard: $(CLI_OBJS) $(CLI_CORE) $(FLAGS_FILE)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJS) $(CLI_CORE) -lcjson -lpthread -lm $(HIREDIS_A)

$(BUILD)/tests/cghost: tests/hosts/cghost.c $(FLAGS_FILE) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -lcurl -lpthread

$(BUILD)/tests/rsshost: tests/hosts/rsshost.c $(FLAGS_FILE) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -lcurl -lpthread

# The multi-API host (issue 13): an epoll loop over socket_action, or perform + poll.
$(BUILD)/tests/cgmulti: tests/hosts/cgmulti.c $(FLAGS_FILE) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -lcurl

$(BUILD)/tests/test-%: tests/unit/test-%.c $(wildcard tests/unit/*.h) $(CORE_OBJS) $(FLAGS_FILE) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(CORE_OBJS) -lcriterion $(LIB_LDLIBS)

$(BUILD)/tests/test-report: tests/unit/test-report.c $(REPORT_OBJS) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -Icli -o $@ $< $(REPORT_OBJS) -lcriterion -lcjson -lm

# A page is written whole or not at all (scdoc stops at the first error in its source).
# Its date: SOURCE_DATE_EPOCH when given (reproducible builds), else the last commit of
# doc/ (a rebuild makes the same page), else today.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct -- doc 2>/dev/null)
SCDOC_CMD = command -v $(SCDOC) >/dev/null || { echo "make: $(SCDOC) not found: \
  scripts/install-deps installs it (Debian package scdoc)" >&2; exit 1; }; \
  $(if $(SOURCE_DATE_EPOCH),SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) )$(SCDOC) <$< >$@.tmp && \
  mv $@.tmp $@

$(BUILD)/%.1: doc/%.1.scd | $(BUILD)/obj
	$(say) SCDOC $@
	$(Q)$(SCDOC_CMD)

$(BUILD)/%.7: doc/%.7.scd | $(BUILD)/obj
	$(say) SCDOC $@
	$(Q)$(SCDOC_CMD)

# The HTML page's pieces (SVG helpers, time buckets): `report` without its command line.
$(BUILD)/tests/test-report-html: tests/unit/test-report-html.c $(REPORT_OBJS) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -Icli -o $@ $< $(REPORT_OBJS) -lcriterion -lcjson -lm

# The Prometheus text writer, the metrics of a state file and the exporter's parsers
# (issue 17), with the library parts they read.
$(BUILD)/tests/test-prom: tests/unit/test-prom.c $(METRICS_OBJS) $(CORE_OBJS) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -Icli -o $@ $< $(METRICS_OBJS) $(CORE_OBJS) -lcriterion $(LIB_LDLIBS)

$(BUILD)/obj $(BUILD)/obj/cli $(BUILD)/tests:
	$(Q)mkdir -p $@

deps:
	@scripts/install-deps --check >/dev/null 2>&1 || scripts/install-deps

check: deps
	@$(MAKE) --no-print-directory all $(UNIT_BINS)
	@scripts/run-tests $(BUILD)

check-unit: deps
	@$(MAKE) --no-print-directory all $(UNIT_BINS)
	@scripts/run-tests $(BUILD) unit

check-integration: deps
	@$(MAKE) --no-print-directory all
	@scripts/run-tests $(BUILD) integration

# Memory stays flat over 100,000 requests in one process (tests/integration/test_leaks.py;
# make check runs it over 20,000).  About two minutes; run by .ci/run.
check-soak: deps
	@$(MAKE) --no-print-directory all
	@CG_BUILD=$(CURDIR)/$(BUILD) CG_SOAK=1 /usr/bin/python3 -m unittest tests.integration.test_leaks -v

# curl's and pycurl's own test suites as a gate: each runs plain, guarded with
# CURLGUARD_MAX_ATTEMPTS=1 and guarded with the defaults; a test passing plain and failing
# guarded fails the gate unless tests/peers/<peer>-expected-<mode>.txt lists it.  Pieces:
# PEERS=curl|pycurl, PEER_MODES=plain,one,defaults, PEER_TESTS="554 587" (see the script).
deps-peers: deps
	@scripts/install-peer-deps --check >/dev/null 2>&1 || scripts/install-peer-deps

check-peers: deps-peers
	@$(MAKE) --no-print-directory all
	@PEERS="$(PEERS)" PEER_MODES="$(PEER_MODES)" PEER_TESTS="$(PEER_TESTS)" \
	  PEER_JOBS="$(PEER_JOBS)" PEER_GUARD_ENV="$(PEER_GUARD_ENV)" scripts/check-peers $(BUILD)

# The summary of the last check-peers runs again, from their saved outputs (no test run).
check-peers-report:
	@PEERS="$(PEERS)" PEER_MODES="$(PEER_MODES)" PEER_TESTS="$(PEER_TESTS)" \
	  scripts/check-peers --report $(BUILD)

# The Debian package: `make install DESTDIR=... PREFIX=/usr` staged, stripped, with the
# control file (dependencies from dpkg-shlibdeps), copyright and changelog.Debian.gz of
# packaging/deb/, built by dpkg-deb (README "Debian package").  deb-lint runs lintian on it.
.PHONY: deb deb-lint
deb: $(BUILD)/libcurlguard.so $(BUILD)/curlguard
	@scripts/make-deb $(BUILD)

# lintian (2.116) leaves two mldbm-elf-* directories in $$TMPDIR each run: it gets one of
# its own under the build directory, removed after it, whatever lintian's verdict.
deb-lint: deb
	@t=$(BUILD)/lintian-tmp; rm -rf $$t && mkdir -p $$t && \
	  TMPDIR=$$(cd $$t && pwd) lintian --info --display-info --tag-display-limit 0 \
	    $$(scripts/make-deb --path $(BUILD)); rc=$$?; rm -rf $$t; exit $$rc

# The same suite against ASan+UBSan builds in build-asan/.
check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 all \
	  $(UNIT_SRCS:tests/unit/%.c=build-asan/tests/%)
	@CG_SANITIZE=1 scripts/run-tests build-asan

# The concurrent parts (handle map, limiter, records, rng, repeats) under ThreadSanitizer.
# Criterion's runner does not start under TSan: a plain stress program instead.  Then the
# TSan-built library inside real hosts: cghost from 6 threads (scripts/tsan-host), and the
# multi driver in pycurl (4 threads, a CurlMulti each) and cgmulti (scripts/tsan-multi).
check-tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan TSAN=1 build-tsan/tests/tsan-stress \
	  build-tsan/libcurlguard.so
	@$(MAKE) --no-print-directory $(BUILD)/tests/cghost $(BUILD)/tests/cgmulti
	@TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/tsan-stress
	@$(MAKE) --no-print-directory BUILD=build-tsan TSAN=1 build-tsan/tests/tsan-fastpaths
	@TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/tsan-fastpaths
	@scripts/tsan-host build-tsan $(BUILD)/tests/cghost
	@scripts/tsan-multi build-tsan $(BUILD)/tests/cgmulti

# The lock-free fast paths (issue 16: handle map, state file, pid): make check-tsan runs it.
$(BUILD)/tests/tsan-fastpaths: tests/tsan/fastpaths.c $(CORE_OBJS) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(CORE_OBJS) $(LIB_LDLIBS)

$(BUILD)/tests/tsan-stress: tests/tsan/stress.c $(CORE_OBJS) | $(BUILD)/tests
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(CORE_OBJS) $(LIB_LDLIBS)

# -s: no "Nothing to be done" line before the demo's own output (V=1 keeps the commands).
demo: deps
	@$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) all
	@scripts/demo $(BUILD)

# Benchmarks (bench/run.py): overhead per request, a batch against a rate-limited provider,
# the fault drill, the limiter micro-benchmark and accuracy, report throughput.  `bench`
# (<= 20 min on 2 cores) rewrites bench/RESULTS.md and bench/drill.png; `bench-quick`
# (<= 4 min) writes build/bench/RESULTS-quick.md.  Neither fails on numbers (only when a
# scenario cannot run).
.PHONY: bench-quick

$(BUILD)/bench/limiter-bench: bench/limiter-bench.c $(CORE_OBJS)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(CORE_OBJS) $(LIB_LDLIBS)

$(BUILD)/bench/batch-host: bench/batch-host.c $(FLAGS_FILE)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -lcurl -lpthread

BENCH_BINS := $(BUILD)/bench/limiter-bench $(BUILD)/bench/batch-host

# Fleets (issue 15): one admission through the shared-state interface, file vs Redis.
$(BUILD)/bench/fleet-bench: bench/fleet-bench.c $(CORE_OBJS)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(CORE_OBJS) $(LIB_LDLIBS)
BENCH_BINS += $(BUILD)/bench/fleet-bench

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@$(PYTHON) bench/run.py --build $(BUILD) --command "make bench"

bench-quick: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@$(PYTHON) bench/run.py --quick --build $(BUILD) --command "make bench-quick"

install: $(BUILD)/libcurlguard.so $(BUILD)/curlguard $(MAN_PAGES)
	$(Q)install -d $(DESTDIR)$(PREFIX)/lib/curlguard $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/share/curlguard $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7
	$(say) INSTALL $(DESTDIR)$(PREFIX)/lib/curlguard/libcurlguard.so
	$(Q)install -m 0755 $(BUILD)/libcurlguard.so $(DESTDIR)$(PREFIX)/lib/curlguard/libcurlguard.so
	$(say) INSTALL $(DESTDIR)$(PREFIX)/bin/curlguard
	$(Q)install -m 0755 $(BUILD)/curlguard $(DESTDIR)$(PREFIX)/bin/curlguard
	$(say) INSTALL $(DESTDIR)$(PREFIX)/share/curlguard/prices.json
	$(Q)install -m 0644 data/prices.json $(DESTDIR)$(PREFIX)/share/curlguard/prices.json
	$(say) INSTALL $(DESTDIR)$(MANDIR)/man1/curlguard.1
	$(Q)install -m 0644 $(BUILD)/curlguard.1 $(DESTDIR)$(MANDIR)/man1/curlguard.1
	$(say) INSTALL $(DESTDIR)$(MANDIR)/man7/libcurlguard.7
	$(Q)install -m 0644 $(BUILD)/libcurlguard.7 $(DESTDIR)$(MANDIR)/man7/libcurlguard.7

uninstall:
	$(say) UNINSTALL $(DESTDIR)$(PREFIX)
	$(Q)rm -f $(DESTDIR)$(PREFIX)/bin/curlguard $(DESTDIR)$(PREFIX)/lib/curlguard/libcurlguard.so \
	  $(DESTDIR)$(PREFIX)/share/curlguard/prices.json \
	  $(DESTDIR)$(MANDIR)/man1/curlguard.1 $(DESTDIR)$(MANDIR)/man7/libcurlguard.7
	$(Q)rmdir $(DESTDIR)$(PREFIX)/lib/curlguard $(DESTDIR)$(PREFIX)/share/curlguard 2>/dev/null || true

clean:
	$(say) CLEAN "build build-asan build-tsan build-fuzz"
	$(Q)rm -rf build build-asan build-tsan build-fuzz

include fuzz/fuzz.mk

# PHP's own ext/curl tests (php-src run-tests.php) against /usr/bin/php, plain and guarded
# (issue 14, scripts/check-php-peer; about 2 minutes, sources cached with check-peers').
.PHONY: check-php-peer
check-php-peer: $(BUILD)/libcurlguard.so
	@scripts/check-php-peer $(BUILD)
