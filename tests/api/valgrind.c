/*
 * Valgrind cannot run the hit path (it emulates the CPU; a breakpoint
 * engine that patches code and resumes from the signal context is outside
 * what it models), but everything before the first hit can: symbol
 * loading, resolution, the registry, slot building, the error paths.
 * Run those cases of api-kprobes, and api-stacktrace's unprobed walks,
 * under memcheck: no error, no definite leak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ukt.h"

static void memcheck(const char *test, const char *filter)
{
	char self[4096], bin[4200], cmd[8600];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(bin, sizeof(bin), "%s/%s", self, test);
	if (access("/usr/bin/valgrind", X_OK) != 0)
		UKT_FAIL("valgrind is not installed (scripts/install-deps)");
	snprintf(cmd, sizeof(cmd),
		 "UKPROBES_QUIET=1 valgrind -q --error-exitcode=9 --leak-check=full "
		 "--errors-for-leak-kinds=definite %s %s >/dev/null 2>&1", bin, filter);
	int st = system(cmd);
	UKT_ASSERT(WIFEXITED(st));
	UKT_EQ(WEXITSTATUS(st), 0);
}

UKT_CASE_T(memcheck_error_paths, 180) { memcheck("api-kprobes", "error_codes"); }
UKT_CASE_T(memcheck_registration_of_libc_probe, 180)
{
	memcheck("api-kprobes", "list_names_shared_objects");
}
/* stack traces without a probe hit: the walker's reads, its rule cache */
UKT_CASE_T(memcheck_stack_traces, 180) { memcheck("api-stacktrace", "unprobed_trace_is_the_truth"); }
UKT_CASE_T(memcheck_stack_traces_signal, 180)
{
	memcheck("api-stacktrace", "traces_in_signal_handler");
}
