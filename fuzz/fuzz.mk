# fuzz.mk - libFuzzer targets (included by ../Makefile; README "Fuzzing").
#
#   make fuzz        build, then run each target FUZZ_SECONDS (default 60) in turn
#   make fuzz-ci     the same for 30 s each; fails on any finding (crash, sanitizer
#                    report, invariant, timeout, leak)
#   make fuzz-build  build only: build-fuzz/fuzz/fuzz-<target>
#
# Each target is one parser that reads bytes from the network or from a file, built with
# clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined (libFuzzer
# from Debian's libclang-rt-14-dev).  Seeds: fuzz/corpus/<target>/ (committed); what the
# fuzzer adds goes to build-fuzz/corpus/<target>/, findings to build-fuzz/artifacts/.

FUZZ_TARGETS := usage usage-diff ratelimit retry-after hints config price url body report-rec exporter
FUZZ_BUILD := build-fuzz
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# clang warns where gcc does not (__atomic_store from a const double in limiter.c).
FUZZ_WARN := -Wno-incompatible-pointer-types-discards-qualifiers
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/fuzz-%)

.PHONY: fuzz fuzz-ci fuzz-build fuzz-bins

fuzz-build: deps
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
	  CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN) $(FUZZ_WARN)" fuzz-bins

fuzz-bins: $(FUZZ_BINS)

fuzz: fuzz-build
	@fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-ci: fuzz-build
	@fuzz/run $(FUZZ_BUILD) 30 $(FUZZ_TARGETS)

$(BUILD)/fuzz/fuzz-report-rec: fuzz/fuzz-report-rec.c fuzz/fuzz.h $(REPORT_OBJS)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -Isrc -Icli -o $@ $< $(REPORT_OBJS) -lcjson -lm

$(BUILD)/fuzz/fuzz-exporter: fuzz/fuzz-exporter.c fuzz/fuzz.h $(BUILD)/obj/cli/exporter-http.o
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -Isrc -Icli -o $@ $< $(BUILD)/obj/cli/exporter-http.o

$(BUILD)/fuzz/fuzz-%: fuzz/fuzz-%.c fuzz/fuzz.h $(CORE_OBJS)
	@mkdir -p $(@D)
	$(say) CCLD $@
	$(Q)$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -Isrc -o $@ $< $(CORE_OBJS) $(LIB_LDLIBS) -lcurl
