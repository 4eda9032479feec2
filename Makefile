# ukprobes: plain make (see README "Dependencies" for why).
#   make            library: build/libukprobes.so.0, build/libukprobes.a
#   make test       every test case, each in its own process
#   make demo       the examples, with readable output
#   make bench      ns per hit beside same-run floors and peers
#   make install PREFIX=/usr/local

PREFIX   ?= /usr/local
VERSION  := 0.1.0
SOVER    := 0
B        := build

WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
BASE_CFLAGS := -std=c11 $(WARN) -D_GNU_SOURCE -Iinclude
LIB_CFLAGS  := $(BASE_CFLAGS) -Isrc -fPIC -fvisibility=hidden \
	-ftls-model=initial-exec -fno-strict-aliasing
LIB_LDLIBS  := -lZydis -lpthread -ldl -lgcc_s
# gcc: keep every function in .text (no .text.unlikely split); clang has no
# such split by default and no such flag
NO_REORDER  := $(shell $(CC) -fno-reorder-functions -E -x c /dev/null >/dev/null 2>&1 && echo -fno-reorder-functions)

LIB_SRCS := $(wildcard src/*.c src/arch/x86_64/*.c)
LIB_ASMS := $(wildcard src/arch/x86_64/*.S)
LIB_OBJS := $(patsubst %.c,$(B)/%.o,$(LIB_SRCS)) $(patsubst %.S,$(B)/%.o,$(LIB_ASMS))
LIB_HDRS := $(wildcard include/*.h include/ukprobes/*.h src/*.h src/arch/x86_64/*.h)

SO      := $(B)/libukprobes.so.$(SOVER)
AR_LIB  := $(B)/libukprobes.a

# Tests: tests/<group>/<name>.c -> build/tests/<group>-<name>, linked with
# the runner.  unit tests link the static library (they reach internals);
# the others link the shared library exactly as users do.
TEST_SRCS := $(wildcard tests/unit/*.c tests/api/*.c tests/real/*.c tests/stress/*.c tests/ftrace/*.c tests/quiet/*.c)
TEST_BINS := $(foreach s,$(TEST_SRCS),$(B)/tests/$(subst /,-,$(patsubst tests/%.c,%,$(s))))
PROG_SRCS := $(wildcard tests/progs/*.c)
PROG_BINS := $(patsubst tests/progs/%.c,$(B)/progs/%,$(PROG_SRCS))
PROG_CXX  := $(wildcard tests/progs/*.cc)
PROG_BINS += $(patsubst tests/progs/%.cc,$(B)/progs/%,$(PROG_CXX))
SOLIB_SRCS := $(wildcard tests/solibs/*.c)
SOLIB_BINS := $(patsubst tests/solibs/%.c,$(B)/solibs/%.so,$(SOLIB_SRCS))
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRCS))
EX_SRCS   := $(wildcard examples/*.c)
EX_BINS   := $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRCS))
EX_PRELOAD := $(patsubst examples/preload/%.c,$(B)/examples/%.so,$(wildcard examples/preload/*.c))
# tools/<name>.c -> build/tools/<name>: developer tools that reach the
# engine's internals, so they link the static library
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_BINS := $(patsubst tools/%.c,$(B)/tools/%,$(TOOL_SRCS))

USER_CFLAGS := $(BASE_CFLAGS) -O2 -g -pthread
USER_LINK   := -L$(B) -l:libukprobes.so.$(SOVER) -Wl,-rpath,'$$ORIGIN/..' -ldl -lpthread -lm

# Further layers add their sources, rules and test binaries here, one
# fragment each (mk/<layer>.mk): after the variables above, before any
# rule's prerequisites expand LIB_OBJS (the library's), TEST_BINS and
# friends.
include $(wildcard mk/*.mk)

.PHONY: sanitize all lib tests progs bench-bins examples test demo bench install clean deps tools coverage

all: lib

lib: $(SO) $(B)/libukprobes.so $(AR_LIB)

deps:
	scripts/install-deps

# The hit path of optimised probes runs without saving vector state when
# the handlers do not touch it: the compiler must not use it there either.
$(B)/src/trap.o: FILE_CFLAGS := -mgeneral-regs-only
$(B)/src/kret.o: FILE_CFLAGS := -mgeneral-regs-only
$(B)/src/ftrace_hit.o: FILE_CFLAGS := -mgeneral-regs-only
$(B)/src/stacktrace.o: FILE_CFLAGS := -mgeneral-regs-only

# All of ukprobes' code goes to section ukp_text, so the blacklist can
# cover it by __start_/__stop_ukp_text even when linked statically.
$(B)/%.o: %.c $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) $(NO_REORDER) $(FILE_CFLAGS) -c $< -o $@
	objcopy $(foreach t,.text .text.unlikely .text.hot .text.startup,--rename-section $(t)=ukp_text,alloc,load,readonly,code,contents) $@

$(B)/%.o: %.S $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(SO): $(LIB_OBJS) ukprobes.map
	@mkdir -p $(B)
	$(CC) $(CFLAGS) -shared -o $@ $(LIB_OBJS) -Wl,-soname,libukprobes.so.$(SOVER) \
		-Wl,--version-script=ukprobes.map -Wl,-z,now -Wl,-z,noexecstack $(LIB_LDLIBS)

$(B)/libukprobes.so: $(SO)
	ln -sf libukprobes.so.$(SOVER) $@

$(AR_LIB): $(LIB_OBJS)
	@mkdir -p $(B)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

$(B)/ukt_main.o: tests/ukt_main.c tests/ukt.h
	@mkdir -p $(B)
	$(CC) $(USER_CFLAGS) -c $< -o $@

$(B)/tests/unit-%: tests/unit/%.c $(B)/ukt_main.o $(AR_LIB) tests/ukt.h $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Isrc -Itests -o $@ $< $(B)/ukt_main.o $(AR_LIB) $(LIB_LDLIBS) -lm

# position-independent: what jump optimisation may assume about indirect
# jumps in an executable depends on it (api-optimize shows both sides)
define user_test_rule
$(B)/tests/$(1)-%: tests/$(1)/%.c $(B)/ukt_main.o $(SO) tests/ukt.h $(wildcard tests/*/*.h tests/*/*.inc)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(USER_CFLAGS) -fPIE -pie -Itests -rdynamic -o $$@ $$< $(B)/ukt_main.o $$(USER_LINK) -lz -lZydis
endef
$(foreach g,api real stress,$(eval $(call user_test_rule,$(g))))

# ftrace: traceable code built both ways the compiler records patch sites.
# tests/fttargets/targets.c is compiled twice, with its functions named
# fe_* (-pg -mfentry -mrecord-mcount: call __fentry__ sites made nops by
# ukprobes) and pf_* (-fpatchable-function-entry=5: five 1-byte nops);
# -pg only at compile time (linking with it would add gmon's startup).
FT_FENTRY := -pg -mfentry -mrecord-mcount
# clang has no -mrecord-mcount on x86: the traceable code is gcc's always
FT_CC     := gcc
FT_PFE    := -fpatchable-function-entry=5
FT_OBJS   := $(B)/fttargets/fe.o $(B)/fttargets/pf.o
$(B)/fttargets/fe.o: tests/fttargets/targets.c tests/fttargets/targets.h
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIE $(FT_FENTRY) -DFT_P=fe_ -c -o $@ $<
$(B)/fttargets/pf.o: tests/fttargets/targets.c tests/fttargets/targets.h
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIE $(FT_PFE) -DFT_P=pf_ -c -o $@ $<
define ft_test_rule
$(B)/tests/$(1)-%: tests/$(1)/%.c $(B)/ukt_main.o $(SO) $(FT_OBJS) tests/ukt.h tests/fttargets/targets.h
	@mkdir -p $$(dir $$@)
	$$(CC) $$(USER_CFLAGS) -fPIE -pie -Itests -rdynamic -o $$@ $$< $(FT_OBJS) $(B)/ukt_main.o $$(USER_LINK) -lz -lZydis
endef
# quiet: the engine's machinery unseen by the program (probes and ftrace
# filters changing around threads blocked in system calls, exec)
$(foreach g,ftrace quiet,$(eval $(call ft_test_rule,$(g))))
# a library the ftrace tests dlopen, both ways (dl_fe_*, dl_pf_*)
$(B)/solibs/ftdl_fe.so: tests/fttargets/dl.c
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIC -shared $(FT_FENTRY) -DFT_P=dl_fe_ -o $@ $<
$(B)/solibs/ftdl_pf.so: tests/fttargets/dl.c
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIC -shared $(FT_PFE) -DFT_P=dl_pf_ -o $@ $<
SOLIB_BINS += $(B)/solibs/ftdl_fe.so $(B)/solibs/ftdl_pf.so
# probing libraries the tests preload into real programs (tests/preload)
PRELOAD_BINS := $(patsubst tests/preload/%.c,$(B)/preload/%.so,$(wildcard tests/preload/*.c))
SOLIB_BINS += $(PRELOAD_BINS)
$(B)/preload/%.so: tests/preload/%.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -fPIC -shared -o $@ $< -L$(B) -l:libukprobes.so.$(SOVER) -Wl,-rpath,'$$ORIGIN/..'

$(B)/progs/%: tests/progs/%.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK)

# progs that walk stacks with libunwind: tests/progs/<name>_unw.c
$(B)/progs/%_unw: tests/progs/%_unw.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK) -lunwind

$(B)/progs/%: tests/progs/%.cc $(SO)
	@mkdir -p $(dir $@)
	g++ -std=c++17 -O2 -g -Wall -Wextra -Werror -Iinclude -pthread -rdynamic -o $@ $< $(USER_LINK)

# shared objects the tests dlopen and dlclose
$(B)/solibs/%.so: tests/solibs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -fPIC -shared -o $@ $<
$(B)/solibs/stcb_a.so $(B)/solibs/stcb_b.so: tests/solibs/stcb.inc

$(B)/bench/%: bench/%.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK)

# the stack trace bench compares with libunwind's unw_backtrace
$(B)/bench/ukp-stack-bench: bench/ukp-stack-bench.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK) -lunwind

# the ftrace bench's target, three ways (bench/ft/target.c says which)
$(B)/bench/ft/pfe.o: bench/ft/target.c
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIE -fpatchable-function-entry=5 -DBT_NAME=bt_pfe -c -o $@ $<
$(B)/bench/ft/instr.o: bench/ft/target.c
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIE -finstrument-functions -DBT_NAME=bt_instr -c -o $@ $<
$(B)/bench/ft/pg.o: bench/ft/target.c
	@mkdir -p $(dir $@)
	$(FT_CC) $(USER_CFLAGS) -fPIE -pg -DBT_NAME=bt_pg -c -o $@ $<
FTB_OBJS := $(B)/bench/ft/pfe.o $(B)/bench/ft/instr.o $(B)/bench/ft/pg.o
$(B)/bench/ukp-ftrace-bench: bench/ukp-ftrace-bench.c $(SO) $(FTB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(FTB_OBJS) $(USER_LINK)
# the same, linked with -pg: what uftrace record traces
$(B)/bench/ukp-ftrace-bench-pg: bench/ukp-ftrace-bench.c $(SO) $(FTB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -pg -o $@ $< $(FTB_OBJS) $(USER_LINK)

$(B)/tools/%: tools/%.c $(AR_LIB) $(wildcard tests/*/*.h) tests/ukt.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Isrc -Itests -o $@ $< $(AR_LIB) $(LIB_LDLIBS) -lm

# ukp-reach runs zlib's workload (tests/real/zlibwork.h)
$(B)/tools/ukp-reach: tools/ukp-reach.c $(AR_LIB) $(wildcard tests/*/*.h) tests/ukt.h
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Isrc -Itests -o $@ $< $(AR_LIB) $(LIB_LDLIBS) -lm -lz

$(B)/examples/%: examples/%.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK)

$(B)/examples/%.so: examples/preload/%.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -fPIC -shared -o $@ $< -L$(B) -l:libukprobes.so.$(SOVER) -Wl,-rpath,'$$ORIGIN/..'

tests: lib $(TEST_BINS) $(PROG_BINS) $(SOLIB_BINS) $(EX_PRELOAD)
progs: $(PROG_BINS)
bench-bins: $(BENCH_BINS) $(B)/bench/ukp-ftrace-bench-pg $(TOOL_BINS)
tools: $(TOOL_BINS)
examples: $(EX_BINS) $(EX_PRELOAD)

test: deps
	$(MAKE) tests
	scripts/run-tests $(B)

demo: deps
	$(MAKE) examples
	scripts/demo $(B)

bench: deps
	$(MAKE) bench-bins
	scripts/bench $(B)
	scripts/coverage $(B)

# share of function entries and instruction boundaries that can be
# jump-optimised in real libraries, with the count per refusal reason
coverage: deps
	$(MAKE) tools
	scripts/coverage $(B)

# The library under UBSan (every undefined behaviour fatal), with the API
# tests.  ASan does not apply: it cannot follow stacks abandoned by the
# fault path's longjmp out of a signal handler.
sanitize: deps
	$(MAKE) B=build-ubsan CFLAGS="-O1 -g -fsanitize=undefined -fno-sanitize-recover=all" \
		lib $(subst $(B)/,build-ubsan/,$(filter $(B)/tests/api-kprobes,$(TEST_BINS))) build-ubsan/solibs/ukptarget.so
	UKPROBES_QUIET=1 build-ubsan/tests/api-kprobes

install: lib
	install -d $(DESTDIR)$(PREFIX)/include/ukprobes $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/ukprobes.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/ukprobes/*.h $(DESTDIR)$(PREFIX)/include/ukprobes/
	install -m 755 $(SO) $(DESTDIR)$(PREFIX)/lib/libukprobes.so.$(VERSION)
	ln -sf libukprobes.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libukprobes.so.$(SOVER)
	ln -sf libukprobes.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libukprobes.so
	install -m 644 $(AR_LIB) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' ukprobes.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/ukprobes.pc

clean:
	rm -rf $(B)
