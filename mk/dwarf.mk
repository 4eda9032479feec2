# Source-level definitions (cli/dwarf.c): the DWARF test's target built
# unoptimized and optimized, by gcc and by clang.
#   build/cli-targets/dsrc-gcc-O0, dsrc-gcc-O2, dsrc-clang-O0, dsrc-clang-O2,
#   dsrc-fortify
# The same for targets/dent.c (entry values, pieces): dent-gcc-O0...
DWARF_TARGETS := $(foreach t,dsrc dent,$(foreach c,gcc clang,$(foreach o,O0 O2,\
	$(B)/cli-targets/$(t)-$(c)-$(o)))) $(B)/cli-targets/dsrc-fortify
$(B)/cli-targets/dsrc-gcc-%: tests/cli/targets/dsrc.c
	@mkdir -p $(dir $@)
	gcc -std=c11 -Wall -Wextra -Werror -g -$* -o $@ $<
# with glibc's _FORTIFY_SOURCE: inlined copies of its external printf
$(B)/cli-targets/dsrc-fortify: tests/cli/targets/dsrc.c
	@mkdir -p $(dir $@)
	gcc -std=c11 -Wall -Wextra -Werror -g -O2 -D_FORTIFY_SOURCE=2 -o $@ $<
$(B)/cli-targets/dsrc-clang-%: tests/cli/targets/dsrc.c
	@mkdir -p $(dir $@)
	clang -std=c11 -Wall -Wextra -Werror -g -$* -o $@ $<
$(B)/cli-targets/dent-gcc-%: tests/cli/targets/dent.c
	@mkdir -p $(dir $@)
	gcc -std=c11 -Wall -Wextra -Werror -g -$* -o $@ $<
$(B)/cli-targets/dent-clang-%: tests/cli/targets/dent.c
	@mkdir -p $(dir $@)
	clang -std=c11 -Wall -Wextra -Werror -g -$* -o $@ $<
# a template instantiated in two CUs, static initializers (targets/dtpl_*.cc)
DWARF_TARGETS += $(B)/cli-targets/dtpl-gcc-O0 $(B)/cli-targets/dtpl-clang-O0
$(B)/cli-targets/dtpl-gcc-%: tests/cli/targets/dtpl_a.cc tests/cli/targets/dtpl_b.cc tests/cli/targets/dtpl_c.cc tests/cli/targets/dtpl.h
	@mkdir -p $(dir $@)
	g++ -Wall -Wextra -Werror -g -$* -o $@ $(filter %.cc,$^)
$(B)/cli-targets/dtpl-clang-%: tests/cli/targets/dtpl_a.cc tests/cli/targets/dtpl_b.cc tests/cli/targets/dtpl_c.cc tests/cli/targets/dtpl.h
	@mkdir -p $(dir $@)
	clang++ -Wall -Wextra -Werror -g -$* -o $@ $(filter %.cc,$^)
# a library only the program's RUNPATH finds (targets/dlib.c, duse.c)
DWARF_TARGETS += $(B)/cli-targets/runpath/duse
$(B)/cli-targets/runpath/libdlib.so.1: tests/cli/targets/dlib.c tests/cli/targets/dlib.h
	@mkdir -p $(dir $@)
	gcc -std=c11 -Wall -Wextra -Werror -g -O2 -fPIC -shared -Wl,-soname,libdlib.so.1 -o $@ $<
$(B)/cli-targets/runpath/duse: tests/cli/targets/duse.c tests/cli/targets/dlib.h $(B)/cli-targets/runpath/libdlib.so.1
	gcc -std=c11 -Wall -Wextra -Werror -g -O2 -o $@ $< $(dir $@)libdlib.so.1 -Wl,-rpath,'$$ORIGIN'
.PHONY: dwarf-targets
dwarf-targets: $(DWARF_TARGETS)
tests: $(DWARF_TARGETS)
$(B)/tests/cli-dwarf: $(DWARF_TARGETS)

# bench/ukp-dwarf-bench.c: e3 written with variable names (translated by
# cli/dwarf.c) against e3 written with registers, same function, same run
$(B)/bench/ukp-dwarf-bench: bench/ukp-dwarf-bench.c $(B)/cli/dwarf.o $(B)/cli/elf.o $(SO)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Icli -rdynamic -o $@ $< $(B)/cli/dwarf.o $(B)/cli/elf.o \
		$(USER_LINK) -ldw -lelf

# C++ names (targets/dcxx.cc): g++ and clang++, -O0 and -O2
DCXX_TARGETS := $(foreach c,gcc clang,$(foreach o,O0 O2,$(B)/cli-targets/dcxx-$(c)-$(o)))
$(B)/cli-targets/dcxx-gcc-%: tests/cli/targets/dcxx.cc
	@mkdir -p $(dir $@)
	g++ -std=c++17 -Wall -Wextra -Werror -g -$* -o $@ $<
$(B)/cli-targets/dcxx-clang-%: tests/cli/targets/dcxx.cc
	@mkdir -p $(dir $@)
	clang++ -std=c++17 -Wall -Wextra -Werror -g -$* -o $@ $<
dwarf-targets: $(DCXX_TARGETS)
tests: $(DCXX_TARGETS)
$(B)/tests/cli-dwarf: $(DCXX_TARGETS)

# C++ base classes, a one-line method (targets/dinh.cc): g++ and clang++
DINH_TARGETS := $(foreach c,gcc clang,$(foreach o,O0 O2,$(B)/cli-targets/dinh-$(c)-$(o)))
$(B)/cli-targets/dinh-gcc-%: tests/cli/targets/dinh.cc
	@mkdir -p $(dir $@)
	g++ -std=c++17 -Wall -Wextra -Werror -g -$* -o $@ $<
$(B)/cli-targets/dinh-clang-%: tests/cli/targets/dinh.cc
	@mkdir -p $(dir $@)
	clang++ -std=c++17 -Wall -Wextra -Werror -g -$* -o $@ $<
dwarf-targets: $(DINH_TARGETS)
tests: $(DINH_TARGETS)
$(B)/tests/cli-dwarf: $(DINH_TARGETS)

# what the corrupt_* cases patch (targets/dbad.c): gcc -O0
$(B)/cli-targets/dbad: tests/cli/targets/dbad.c
	@mkdir -p $(dir $@)
	gcc -std=c11 -Wall -Wextra -Werror -g -O0 -o $@ $<
dwarf-targets: $(B)/cli-targets/dbad
tests: $(B)/cli-targets/dbad
$(B)/tests/cli-dwarf: $(B)/cli-targets/dbad
