/* SPDX-License-Identifier: MIT */
/* --format=json: Chrome trace events that parse, with the events and
 * the metadata naming the process and its threads; -o FILE; a probe and
 * a return probe on one function paired into complete events. */
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
		"m=[e for e in ev if e['ph']=='X' and e['name']=='mark']\n"
		"r=[e for e in ev if e['ph']=='i']\n"
		"assert r==[], r\n"
		"assert [e['args']['n'] for e in m]==[1,2,3], m\n"
		"assert [e['args']['v'] for e in m]==[1,2,3], m\n"
		"assert all(e['cat']=='t' and e['dur']>=0 and isinstance(e['ts'],(int,float)) for e in m)\n"
		"assert all(e['args']['c']=='ender' for e in m), m\n"
		"pid=m[0]['pid']\n"
		"meta=[e for e in ev if e['ph']=='M']\n"
		"assert any(e['name']=='process_name' and e['pid']==pid and e['args']['name']=='ender' for e in meta), meta\n"
		"assert any(e['name']=='thread_name' and e['tid']==m[0]['tid'] for e in meta), meta\n"
		"ts=[e['ts'] for e in m]\n"
		"assert sorted(ts)==ts and len(ts)==3\n"
		"print('ok')\n";
	char *py2[] = { (char *)"/usr/bin/python3", (char *)"-c", (char *)check, path, NULL };
	r = run_argv(py2);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "ok\n"));
	run_free(&r);
	unlink(path);
}

/* runs ukprobe --format=json -o FILE with the definitions and COMMAND of
 * args, then the python check with FILE and the target's stdout (its own
 * counts) as arguments; that stdout also into out */
static void json_check(const char *const *args, const char *check, char *out, size_t nout)
{
	char path[] = "/tmp/ukt-cli-jsonXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	char *argv[64];
	int n = 0;
	argv[n++] = (char *)ukprobe_path();
	argv[n++] = (char *)"trace";
	argv[n++] = (char *)"--format=json";
	argv[n++] = (char *)"-o";
	argv[n++] = path;
	for (int k = 0; args[k] && n < 63; k++)
		argv[n++] = (char *)args[k];
	argv[n] = NULL;
	struct run r = run_argv(argv);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, "ukprobe: 0 events lost"));
	snprintf(out, nout, "%s", r.out);
	run_free(&r);
	char *py[] = { (char *)"/usr/bin/python3", (char *)"-c", (char *)check, path, out, NULL };
	r = run_argv(py);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "ok\n"));
	run_free(&r);
	unlink(path);
}

/* the X events of NAME nest as the calls did: each one's parent is the
 * smallest enclosing one of the same name, its d one more */
#define PY_NEST							\
	"def nest(xs):\n"						\
	"    xs=sorted(xs,key=lambda e:(e['ts'],-e['dur']))\n"		\
	"    st=[]\n"							\
	"    for e in xs:\n"						\
	"        end=e['ts']+e['dur']\n"				\
	"        while st and not (st[-1]['ts']<=e['ts'] and e['ts']+e['dur']<=st[-1]['ts']+st[-1]['dur']):\n" \
	"            st.pop()\n"					\
	"        if st:\n"						\
	"            assert st[-1]['args']['d']==e['args']['d']+1, (st[-1],e)\n" \
	"        else:\n"						\
	"            assert e['args']['d']==D, e\n"			\
	"        st.append(e)\n"					\
	"    return len(xs)\n"

UKT_CASE(json_pairs_nest_recursion)
{
	/* rec: DEPTH+1 nested calls, N times; tree: a binary tree of calls */
	const char *args[] = { "p:t/rec rec d=%di:s32", "r:t/rec_ret rec v=$retval:s32 d=$arg1:s32",
			       "p:t/tree tree d=%di:s32", "r:t/tree_ret tree v=$retval:s32",
			       "--", target("recur"), "50", "6", NULL };
	const char *check =
		"import json,sys,decimal\n"
		"D=6\n"
		"d=json.load(open(sys.argv[1]),parse_float=decimal.Decimal)\n"
		"ev=d['traceEvents']\n"
		"cnt=dict(kv.split('=') for kv in sys.argv[2].split())\n"
		"i=[e for e in ev if e['ph']=='i']\n"
		"assert i==[], i[:5]\n"
		"rec=[e for e in ev if e['ph']=='X' and e['name']=='rec']\n"
		"tree=[e for e in ev if e['ph']=='X' and e['name']=='tree']\n"
		"assert not [e for e in ev if e['ph']=='X' and e['name'] not in ('rec','tree')]\n"
		"assert len(rec)==int(cnt['rec']) and len(tree)==int(cnt['tree']), (len(rec),len(tree),cnt)\n"
		"assert all(e['dur']>=0 and e['cat']=='t' and e['pid']==rec[0]['pid'] for e in rec+tree)\n"
		/* the arguments of both sides; the return's d under its event's name */
		"assert all(e['args']['v']==e['args']['d']==e['args']['rec_ret.d'] for e in rec), rec[:3]\n"
		"assert all(set(e['args'])=={'d','v'} and e['args']['v']==e['args']['d'] for e in tree), tree[:3]\n"
		PY_NEST
		"nest(rec); nest(tree)\n"
		/* a tree call has exactly two children */
		"for e in tree:\n"
		"    ch=[c for c in tree if c is not e and e['ts']<=c['ts'] and c['ts']+c['dur']<=e['ts']+e['dur'] and c['args']['d']==e['args']['d']-1]\n"
		"    assert len(ch)==(2 if e['args']['d']>0 else 0), (e,ch)\n"
		"print('ok')\n";
	char out[256];
	json_check(args, check, out, sizeof out);
	UKT_STREQ(out, "rec=350 tree=127 jumped=0\n");
}

/* an entry whose return never comes (longjmp out of every level, and
 * calls open when the program exits) is written as an "i" event: every
 * call is there once, as X or as i */
UKT_CASE(json_unreturned_entries_are_instants)
{
	const char *args[] = { "p:t/rec rec d=%di:s32", "r:t/rec_ret rec",
			       "--", target("recur"), "3", "4", "jump", NULL };
	const char *check =
		"import json,sys,decimal\n"
		"D=4\n"
		"d=json.load(open(sys.argv[1]),parse_float=decimal.Decimal)\n"
		"ev=d['traceEvents']\n"
		"cnt=dict(kv.split('=') for kv in sys.argv[2].split())\n"
		"x=[e for e in ev if e['ph']=='X']\n"
		"i=[e for e in ev if e['ph']=='i']\n"
		"assert all(e['name']=='rec' for e in x+i)\n"
		"assert len(i)==int(cnt['jumped'])==5, (i,cnt)\n"
		"assert len(x)+len(i)==int(cnt['rec']), (len(x),len(i),cnt)\n"
		/* the calls left by longjmp: one each of d 4..0, after every X */
		"assert sorted(e['args']['d'] for e in i)==[0,1,2,3,4], i\n"
		"assert min(e['ts'] for e in i)>max(e['ts']+e['dur'] for e in x)\n"
		PY_NEST
		"assert nest(x)==15\n"
		"print('ok')\n";
	char out[256];
	json_check(args, check, out, sizeof out);
	UKT_STREQ(out, "rec=20 tree=31 jumped=5\n");
}

/* filters on either side: a return whose entry was filtered out and an
 * entry whose return was are instants, every other call pairs; a return
 * probe on another function and a probe inside the function stay
 * instants */
UKT_CASE(json_pairs_with_filters_and_unpaired)
{
	const char *args[] = { "p:t/rec rec d=%di:s32", "r:t/rec_ret rec v=$retval:s32",
			       "--filter=rec_ret:v>=1", "p:t/tree tree d=%di:s32", "--filter=tree:d!=1",
			       "r:t/mret main", "p:t/tree_in tree+2", "r:t/tree_ret tree v=$retval:s32",
			       "--", target("recur"), "2", "2", NULL };
	const char *check =
		"import json,sys\n"
		"d=json.load(open(sys.argv[1]))\n"
		"ev=d['traceEvents']\n"
		"sel=lambda name,ph:[e for e in ev if e['name']==name and e['ph']==ph]\n"
		"n=lambda name,ph:len(sel(name,ph))\n"
		/* rec: returns of d 0 filtered out: their entries instants */
		"assert n('rec','X')==4 and n('rec','i')==2 and n('rec_ret','i')==0\n"
		"assert all(e['args']=={'d':e['args']['v'],'v':e['args']['v']} for e in sel('rec','X'))\n"
		"assert all(e['args']=={'d':0} for e in sel('rec','i'))\n"
		/* tree: entries of d 1 filtered out: their returns instants */
		"assert n('tree','X')==5 and n('tree','i')==0 and n('tree_ret','i')==2\n"
		"assert all(e['args']['d']==e['args']['v']!=1 for e in sel('tree','X'))\n"
		"assert all(e['args']=={'v':1} for e in sel('tree_ret','i'))\n"
		"assert n('tree_in','i')==7 and n('tree_in','X')==0 and n('mret','i')==1\n"
		"assert not [e for e in ev if '__ukprobe_sp' in e.get('args',{})]\n"
		"print('ok')\n";
	char out[256];
	json_check(args, check, out, sizeof out);
	UKT_STREQ(out, "rec=6 tree=7 jumped=0\n");
}

/* recursion deeper than the return probe's instances: the calls whose
 * return was not recorded (none free) are instants, every other call
 * pairs with its own return (v, the return value, is its d) */
UKT_CASE(json_pairs_deeper_than_maxactive)
{
	const char *args[] = { "p:t/rec rec d=%di:s32", "r:t/rec_ret rec v=$retval:s32",
			       "--", target("recur"), "3", "40", NULL };
	const char *check =
		"import json,sys,decimal\n"
		"D=40\n"
		"d=json.load(open(sys.argv[1]),parse_float=decimal.Decimal)\n"
		"ev=d['traceEvents']\n"
		"cnt=dict(kv.split('=') for kv in sys.argv[2].split())\n"
		"x=[e for e in ev if e['ph']=='X' and e['name']=='rec']\n"
		"i=[e for e in ev if e['ph']=='i' and e['name']=='rec']\n"
		"assert len(x)+len(i)==int(cnt['rec'])==123, (len(x),len(i))\n"
		"assert 0<len(x)<123 and not [e for e in ev if e['name']=='rec_ret']\n"
		"assert all(e['args']=={'d':e['args']['v'],'v':e['args']['v']} for e in x), x\n"
		"assert max(e['args']['d'] for e in i)<min(e['args']['d'] for e in x)\n"
		PY_NEST
		"assert nest(x)==len(x)\n"
		"print('ok')\n";
	char out[256];
	json_check(args, check, out, sizeof out);
	UKT_STREQ(out, "rec=123 tree=127 jumped=0\n");
}

/* threads calling at once: each call paired on its own thread, its
 * entry's and its return's arguments together */
UKT_CASE(json_pairs_per_thread)
{
	const char *args[] = { "p:t/hit hit t=%di:s64 seq=%si:s64",
			       "r:t/hit_ret hit rt=$arg1:s64 rseq=$arg2:s64",
			       "--", target("threads"), "4", "2000", NULL };
	const char *check =
		"import json,sys,decimal\n"
		"d=json.load(open(sys.argv[1]),parse_float=decimal.Decimal)\n"
		"ev=d['traceEvents']\n"
		"x=[e for e in ev if e['ph']=='X']\n"
		"assert not [e for e in ev if e['ph']=='i']\n"
		"assert len(x)==8000 and all(e['name']=='hit' for e in x)\n"
		"assert all(e['args']['t']==e['args']['rt'] and e['args']['seq']==e['args']['rseq'] and e['dur']>=0 for e in x)\n"
		"by={}\n"
		"for e in x: by.setdefault(e['tid'],[]).append(e)\n"
		"assert len(by)==4\n"
		"for tid,v in by.items():\n"
		"    assert len(set(e['args']['t'] for e in v))==1\n"
		"    v.sort(key=lambda e:e['ts'])\n"
		"    assert [e['args']['seq'] for e in v]==list(range(2000))\n"
		"    assert all(a['ts']+a['dur']<=b['ts'] for a,b in zip(v,v[1:]))\n"
		"print('ok')\n";
	char out[256];
	json_check(args, check, out, sizeof out);
	UKT_STREQ(out, "");
	struct run r = ukprobe("trace", "--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "\"ph\":\"X\"") && strstr(r.out, "dur"));
	run_free(&r);
}

/* buffers too small for what four threads record: every record written
 * is there once, as a side of an X event, an "i" event, or counted in a
 * LOST marker; a pair is always one call's two sides */
UKT_CASE(json_pairs_and_lost_events)
{
	char path[] = "/tmp/ukt-cli-jsonXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	struct run r = ukprobe("trace", "--format=json", "-b", "64", "-o", path,
			       "p:t/hit hit t=%di:s64 seq=%si:s64",
			       "r:t/hit_ret hit rt=$arg1:s64 rseq=$arg2:s64",
			       "--", target("threads"), "4", "100000", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, " events lost\n"));
	unsigned long lost = strtoul(strstr(r.err, "ukprobe: ") + 9, NULL, 10);
	run_free(&r);
	char lost_s[32];
	snprintf(lost_s, sizeof lost_s, "%lu", lost);
	const char *check =
		"import json,sys\n"
		"d=json.load(open(sys.argv[1]))\n"
		"ev=d['traceEvents']\n"
		"x=[e for e in ev if e['ph']=='X']\n"
		"i=[e for e in ev if e['ph']=='i' and e['name']!='LOST']\n"
		"lost=sum(e['args']['events'] for e in ev if e['name']=='LOST')\n"
		"assert lost==int(sys.argv[2]), (lost,sys.argv[2])\n"
		"assert 2*len(x)+len(i)+lost==2*400000, (len(x),len(i),lost)\n"
		"assert all(e['args']['t']==e['args']['rt'] and e['args']['seq']==e['args']['rseq'] for e in x)\n"
		"print('ok')\n";
	char *py[] = { (char *)"/usr/bin/python3", (char *)"-c", (char *)check, path, lost_s, NULL };
	r = run_argv(py);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "ok\n"));
	run_free(&r);
	unlink(path);
}
