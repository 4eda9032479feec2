# Dynamic events (src/events/, <ukprobes/events.h>): the definition and
# filter parsers, fetch programs, record buffers.  Read by the top
# Makefile before its first rule, so LIB_OBJS here reaches $(SO) and
# $(AR_LIB).
EV_SRCS := $(wildcard src/events/*.c)
EV_OBJS := $(patsubst %.c,$(B)/%.o,$(EV_SRCS))
LIB_OBJS += $(EV_OBJS)
$(EV_OBJS): $(wildcard src/events/*.h)

# The hit path: general registers only, no jump tables (an indirect jump
# the engine's analysis cannot follow), no loop turned into a call of the
# C library's memset/memcpy: so the handlers run on the lean path.
EV_NOLIBCALL := $(shell $(CC) -fno-tree-loop-distribute-patterns -Werror -E -x c /dev/null >/dev/null 2>&1 && echo -fno-tree-loop-distribute-patterns || echo -fno-builtin)
$(B)/src/events/hit.o: FILE_CFLAGS := -mgeneral-regs-only -fno-jump-tables $(EV_NOLIBCALL)

# tests/events/<name>.c -> build/tests/events-<name>: position-independent
# targets probed by name (-rdynamic), linked with the static library (some
# cases reach the engine's internals: the lean-path check)
EV_TEST_SRCS := $(wildcard tests/events/*.c)
EV_TEST_BINS := $(patsubst tests/events/%.c,$(B)/tests/events-%,$(EV_TEST_SRCS))
TEST_BINS += $(EV_TEST_BINS)
$(B)/tests/events-%: tests/events/%.c $(B)/ukt_main.o $(AR_LIB) tests/ukt.h $(wildcard tests/events/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -fPIE -pie -rdynamic -Isrc -Itests -o $@ $< $(B)/ukt_main.o $(AR_LIB) $(LIB_LDLIBS) -lm

# bench/ukp-events-bench.c: ns per event (e0, e3, er), consumer rates
$(B)/bench/ukp-events-bench: bench/ukp-events-bench.c $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -rdynamic -o $@ $< $(USER_LINK)
bench-bins: $(B)/bench/ukp-events-bench

# make fuzz: the definition, filter and trigger parsers under libFuzzer with ASan
# and UBSan (clang; Debian's libclang-rt-14-dev), FUZZ_TIME seconds from
# the checked-in seeds (fuzz/corpus, read only; new inputs go to
# $(B)/fuzz/corpus).  Fails on a crash, a leak, an abort or a hang.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_SRCS := fuzz/ukpev_fuzz.c src/events/parse.c src/events/filter.c src/events/format.c \
	src/events/trigger.c
.PHONY: fuzz
$(B)/fuzz/ukpev-fuzz: $(FUZZ_SRCS) $(wildcard src/events/*.h) include/ukprobes/events.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $(FUZZ_SRCS)
# and ukprobe's source-level place parser (cli/dwarf.c, whole), a third of
# the time, from its own seeds (fuzz/dwplace-corpus)
# (with the events core's parser, which names raw definitions)
DWPLACE_FUZZ_SRCS := fuzz/dwplace_fuzz.c cli/elf.c $(filter-out fuzz/%,$(FUZZ_SRCS))
$(B)/fuzz/dwplace-fuzz: $(DWPLACE_FUZZ_SRCS) cli/dwarf.c cli/dwarf.h cli/elf.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ \
		$(DWPLACE_FUZZ_SRCS) -ldw -lelf
# and every reader of ELF files (ukprobe's cli/elf.c, the engine's
# src/symbols.c, the events core's src/events/elffile.c), a third of the
# time, from its seeds (fuzz/elf-corpus, made by fuzz/elf-seeds.py): their
# mmap and munmap are the harness's, exact-size heap copies ASan watches
ELF_FUZZ_SRCS := fuzz/elf_fuzz.c cli/elf.c src/events/elffile.c
$(B)/fuzz/elf-fuzz: $(ELF_FUZZ_SRCS) src/symbols.c src/internal.h cli/elf.h src/events/elffile.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc -Dmmap=fz_mmap -Dmunmap=fz_munmap \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $(ELF_FUZZ_SRCS)
# and ukprobe's reading of DWARF (cli/dwarf.c, whole: -F, -L, -V, -D and
# trace's translations of an object's functions, lines and variables), a
# third of the time, from the DWARF tests' targets (copied to
# $(B)/fuzz/dwarf-seeds: no binary is checked in) and the checked-in
# regression inputs (fuzz/dwarf-corpus); its mutator mutates the .debug_*
# sections.  fuzz/lsan.supp: what libdw itself leaks on corrupt input.
DWARF_FUZZ_SRCS := fuzz/dwarf_fuzz.c cli/elf.c $(filter-out fuzz/%,$(FUZZ_SRCS))
$(B)/fuzz/dwarf-fuzz: $(DWARF_FUZZ_SRCS) cli/dwarf.c cli/dwarf.h cli/elf.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ \
		$(DWARF_FUZZ_SRCS) -ldw -lelf
.PHONY: dwarf-seeds
dwarf-seeds: $(DWARF_TARGETS) $(DCXX_TARGETS) $(DINH_TARGETS) $(B)/cli-targets/dbad
	@mkdir -p $(B)/fuzz/dwarf-seeds
	cp $^ $(B)/fuzz/dwarf-seeds/
fuzz: $(B)/fuzz/ukpev-fuzz $(B)/fuzz/dwplace-fuzz $(B)/fuzz/elf-fuzz $(B)/fuzz/dwarf-fuzz dwarf-seeds
	@mkdir -p $(B)/fuzz/corpus $(B)/fuzz/dwplace-corpus $(B)/fuzz/elf-corpus \
		$(B)/fuzz/dwarf-corpus
	$(B)/fuzz/ukpev-fuzz -max_total_time=$(FUZZ_TIME) -timeout=5 -rss_limit_mb=2048 \
		-max_len=4096 -print_final_stats=1 $(B)/fuzz/corpus fuzz/corpus
	$(B)/fuzz/dwplace-fuzz -max_total_time=$$(( $(FUZZ_TIME) / 3 + 1 )) -timeout=5 \
		-rss_limit_mb=2048 -max_len=2048 -print_final_stats=1 \
		$(B)/fuzz/dwplace-corpus fuzz/dwplace-corpus
	$(B)/fuzz/elf-fuzz -max_total_time=$$(( $(FUZZ_TIME) / 3 + 1 )) -timeout=5 \
		-rss_limit_mb=2048 -max_len=20480 -print_final_stats=1 \
		$(B)/fuzz/elf-corpus fuzz/elf-corpus
	LSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/lsan.supp ASAN_OPTIONS=fast_unwind_on_malloc=0 \
	$(B)/fuzz/dwarf-fuzz -max_total_time=$$(( $(FUZZ_TIME) / 3 + 1 )) -timeout=5 \
		-rss_limit_mb=2048 -max_len=32768 -print_final_stats=1 \
		$(B)/fuzz/dwarf-corpus fuzz/dwarf-corpus $(B)/fuzz/dwarf-seeds
