# The ukprobe command and its agent (cli/, agent/, tests/cli/).
#   build/ukprobe                 the command
#   build/libukprobe-agent.so     the library it loads into a target
# Installed as P/bin/ukprobe and P/lib/ukprobe/libukprobe-agent.so (which
# finds P/lib/libukprobes.so.0 by its rpath).

# read before the top Makefile's first rule: none of these is the default goal
CLI_SAVED_GOAL := $(.DEFAULT_GOAL)

UKP_VERSION_DEF := -DUKP_VERSION='"$(VERSION)"'
CLI_SRCS  := $(wildcard cli/*.c)
CLI_OBJS  := $(patsubst %.c,$(B)/%.o,$(CLI_SRCS))
CLI_HDRS  := $(wildcard cli/*.h) agent/proto.h include/ukprobes/events.h
UKPROBE   := $(B)/ukprobe
AGENT_SO  := $(B)/libukprobe-agent.so

$(B)/cli/%.o: cli/%.c $(CLI_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(UKP_VERSION_DEF) -c $< -o $@

$(UKPROBE): $(CLI_OBJS) $(SO)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJS) -L$(B) -l:libukprobes.so.$(SOVER) \
		-Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' -ldw -lelf -lm -lstdc++ -pthread

$(AGENT_SO): agent/agent.c agent/proto.h include/ukprobes/events.h $(SO)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fPIC -shared -fvisibility=hidden -pthread \
		-o $@ $< -L$(B) -l:libukprobes.so.$(SOVER) \
		-Wl,-rpath,'$$ORIGIN:$$ORIGIN/..' -Wl,-z,nodelete

# target programs the tests drive ukprobe against (no ukprobes in them)
# (dlib.c and duse.c: a library and its program, mk/dwarf.mk)
CLI_TARGET_SRCS := $(filter-out %/dlib.c %/duse.c,$(wildcard tests/cli/targets/*.c))
CLI_TARGETS := $(patsubst tests/cli/targets/%.c,$(B)/cli-targets/%,$(CLI_TARGET_SRCS))
$(B)/cli-targets/%: tests/cli/targets/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g -pthread -fno-inline -fno-optimize-sibling-calls -o $@ $<
# a static one: what attach must refuse
$(B)/cli-targets/static_sleep: tests/cli/targets/sleeper.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g -static -o $@ $< -pthread
CLI_TARGETS += $(B)/cli-targets/static_sleep
# dynamically linked (an interpreter) but without libc.so.6: not glibc
$(B)/cli-targets/noglibc: tests/cli/targets/noglibc.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -fPIE -pie -nostdlib -nostartfiles -fno-stack-protector \
		-Wl,--dynamic-linker=/lib64/ld-linux-x86-64.so.2 -o $@ $<
# named here, so they are no intermediate files make would delete
.PHONY: cli-targets
cli-targets: $(CLI_TARGETS)
tests: $(CLI_TARGETS)

CLI_TEST_SRCS := $(wildcard tests/cli/*.c)
CLI_TEST_BINS := $(patsubst tests/cli/%.c,$(B)/tests/cli-%,$(CLI_TEST_SRCS))
$(B)/tests/cli-%: tests/cli/%.c $(B)/ukt_main.o $(SO) tests/ukt.h $(wildcard tests/cli/*.h) \
		$(UKPROBE) $(AGENT_SO) $(CLI_TARGETS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Itests -o $@ $< $(B)/ukt_main.o $(USER_LINK)
TEST_BINS += $(CLI_TEST_BINS)

.PHONY: cli install-ukprobe
cli: $(UKPROBE) $(AGENT_SO)
examples: $(UKPROBE) $(AGENT_SO)

install: install-ukprobe
install-ukprobe: $(UKPROBE) $(AGENT_SO)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/ukprobe
	install -m 755 $(UKPROBE) $(DESTDIR)$(PREFIX)/bin/ukprobe
	install -m 755 $(AGENT_SO) $(DESTDIR)$(PREFIX)/lib/ukprobe/libukprobe-agent.so

# the top Makefile's first rule, whatever fragments define rules after this one
.DEFAULT_GOAL := $(if $(CLI_SAVED_GOAL),$(CLI_SAVED_GOAL),all)
