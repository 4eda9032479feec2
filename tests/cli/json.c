/* SPDX-License-Identifier: MIT */
/* --format=json: Chrome trace events that parse, with the events and
 * the metadata naming the process and its threads; -o FILE. */
#include "run.h"

UKT_CASE(json_parses_and_has_the_events)
{
	char path[] = "/tmp/ukt-cli-jsonXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	struct run r = ukprobe("trace", "--format=json", "-o", path,
			       "p:t/mark mark n=%di:s32 c=$comm", "r:t/ret mark v=$retval:u32",
			       "--", target("ender"), "3", "exit", "0", NULL);
	RUN_EXPECT(r, r.status == 0 && r.nout == 0);
	run_free(&r);
	char *py[] = { (char *)"/usr/bin/python3", (char *)"-m", (char *)"json.tool", path, NULL };
	r = run_argv(py);
	RUN_EXPECT(r, r.status == 0);
	run_free(&r);
	/* the content, checked by python */
	const char *check =
		"import json,sys\n"
		"d=json.load(open(sys.argv[1]))\n"
		"ev=d['traceEvents']\n"
		"m=[e for e in ev if e['ph']=='i' and e['name']=='mark']\n"
		"r=[e for e in ev if e['ph']=='i' and e['name']=='ret']\n"
		"assert [e['args']['n'] for e in m]==[1,2,3], m\n"
		"assert [e['args']['v'] for e in r]==[1,2,3], r\n"
		"assert all(e['cat']=='t' and e['s']=='t' and isinstance(e['ts'],(int,float)) for e in m+r)\n"
		"assert all(e['args']['c']=='ender' for e in m), m\n"
		"pid=m[0]['pid']\n"
		"meta=[e for e in ev if e['ph']=='M']\n"
		"assert any(e['name']=='process_name' and e['pid']==pid and e['args']['name']=='ender' for e in meta), meta\n"
		"assert any(e['name']=='thread_name' and e['tid']==m[0]['tid'] for e in meta), meta\n"
		"ts=[e['ts'] for e in m+r]\n"
		"assert sorted(ts)==sorted(ts) and len(ts)==6\n"
		"print('ok')\n";
	char *py2[] = { (char *)"/usr/bin/python3", (char *)"-c", (char *)check, path, NULL };
	r = run_argv(py2);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "ok\n"));
	run_free(&r);
	unlink(path);
}
