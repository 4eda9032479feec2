/* SPDX-License-Identifier: MIT */
/*
 * Every fetch form and type against functions of this program whose
 * values the test knows, formatted as the kernel prints them.
 */
#include <cpuid.h>
#include <stdbool.h>
#include <ctype.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "evt.h"

struct tobj {
	int32_t i;		/* 0 */
	char name[12];		/* 4 */
	const char *str;	/* 16 */
	struct tobj *next;	/* 24 */
	uint8_t bits;		/* 32 */
	uint8_t pad;
	int16_t arr[4];		/* 34 */
};

long g_val = -12345;
char g_str[] = "global";
volatile unsigned long sink;
unsigned long t_ret_addr, t_frame;

NOIL long t_args(long a, long b, long c, long d, long e, long f, long g, long h)
{
	sink = (unsigned long)(a + b + c + d + e + f + g + h);
	return (long)sink;
}

NOIL int t_obj(struct tobj *o)
{
	sink = (unsigned long)o;
	return o ? o->i : 0;
}

NOIL void t_ptr(const void *p)
{
	sink = (unsigned long)p;
}

NOIL long t_ret(long x, long y)
{
	sink = (unsigned long)x;
	return x * 3 + y;
}

NOIL void t_stack(void)
{
	t_frame = (unsigned long)__builtin_frame_address(0);
	t_ret_addr = (unsigned long)__builtin_return_address(0);
}

static struct ukpev_area *A;
static struct ukpev_reader *R;

static void setup(void)
{
	A = evt_area(0);
	UKT_EQ(ukpev_reader_from_area(A, &R), 0);
}

/* one event, one call, the formatted values of its one record */
static const char *one(const char *def, void (*call)(void))
{
	struct ukpev_event *e = evt_create(A, def);
	call();
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	return evt_fmt(R, 0, UKPEV_FMT_FTRACE);
}

NOIL void call_args(void) { t_args(1, -2, 3, 4, 5, 6, 7, 8); }

UKT_CASE(registers_and_args)
{
	setup();
	UKT_STREQ(one("p:t/a t_args %di %si:s64 b=%si:u8 $arg3 $arg7:u32 $arg8:s16", call_args),
		  " arg1=0x1 arg2=-2 b=254 arg4=0x3 arg5=7 arg6=8");
}

static struct tobj O1, O2;
static const char pstr[] = "xxpointed";
NOIL void call_obj(void)
{
	O1 = (struct tobj){ .i = -7, .name = "first", .str = pstr + 2, .next = &O2,
			    .bits = 0xb6, .arr = { 1, -2, 300, -400 } };
	O2 = (struct tobj){ .i = 42, .name = "second" };
	t_obj(&O1);
}

UKT_CASE(memory_fetches)
{
	setup();
	UKT_STREQ(one("p t_obj i=+0(%di):s32 n=+4(%di):string s=+0(+16(%di)):string "
		      "ni=+0(+24(%di)):s32 nn=+4(+24(%di)):string u=+u0(%di):x32 "
		      "neg=-2(+16(%di)):char", call_obj),
		  " i=-7 n=\"first\" s=\"pointed\" ni=42 nn=\"second\" u=0xfffffff9 neg='x'");
}

/* a list of 300 nodes walked 299 times by +24( ) (next), as deep as
 * CLI.md's "nested to any depth" asks: the last node's i */
static struct tobj chain[300];
NOIL void call_chain(void)
{
	for (int k = 0; k < 300; k++)
		chain[k] = (struct tobj){ .i = 1000 + k, .next = k + 1 < 300 ? &chain[k + 1] : NULL };
	t_obj(&chain[0]);
}

UKT_CASE(deep_nesting)
{
	setup();
	static char def[64 + 5 * 300];
	int n = snprintf(def, sizeof def, "p t_obj last=+0(");
	for (int k = 0; k < 299; k++)
		n += snprintf(def + n, sizeof def - (size_t)n, "+24(");
	n += snprintf(def + n, sizeof def - (size_t)n, "%%di");
	for (int k = 0; k < 300; k++)
		n += snprintf(def + n, sizeof def - (size_t)n, ")");
	snprintf(def + n, sizeof def - (size_t)n, ":s32");
	UKT_STREQ(one(def, call_chain), " last=1299");
}

UKT_CASE(types)
{
	setup();
	UKT_STREQ(one("p t_obj c=+4(%di):char b=+32(%di):b4@2/8 b1=+32(%di):b1@7/8 "
		      "a=+34(%di):s16[4] ax=+34(%di):x16[2] cs=+4(%di):char[3] "
		      "u8=+32(%di):u8 s8=+32(%di):s8 x=+32(%di):x64", call_obj),
		  " c='f' b=13 b1=1 a={1,-2,300,-400} ax={0x1,0xfffe} cs={'f','i','r'} "
		  "u8=182 s8=-74 x=0x12cfffe000100b6");
	/* a NUL char, in quotes as C writes it (the text must not end there) */
	UKT_STREQ(one("p:nulchar t_obj z=+11(%di):char c=+4(%di):char", call_obj), " z='\\0' c='f'");
}

UKT_CASE(symbols_and_data)
{
	setup();
	char def[256], want[256];
	snprintf(def, sizeof(def), "p t_obj g=@g_val:s64 gs=@g_str:string g1=@g_str+1:string "
		 "ga=@%#lx:s64 f=%%di:symbol", (unsigned long)&g_val);
	O1.i = 0;
	struct tobj *fake = (struct tobj *)(void *)((char *)(void *)&t_args + 3);
	struct ukpev_event *e = evt_create(A, def);
	t_obj(fake);	/* reads nothing of it */
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	char sym[128];
	UKT_ASSERT(ukpev_symbolize_self((unsigned long)fake, sym, sizeof(sym), NULL) > 0);
	UKT_ASSERT(!strncmp(sym, "t_args+0x3/0x", 13));
	snprintf(want, sizeof(want), " g=-12345 gs=\"global\" g1=\"lobal\" ga=-12345 f=%s", sym);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), want);
}

UKT_CASE(immediates_and_comm)
{
	setup();
	prctl(PR_SET_NAME, "evt-comm");
	UKT_STREQ(one("p t_args n=\\42 m=\\-5:s32 h=\\0x10:u16 s=\\\"hi there\" c=$comm", call_args),
		  " n=0x2a m=-5 h=16 s=\"hi there\" c=\"evt-comm\"");
}

NOIL void call_stack(void) { t_stack(); }

UKT_CASE(stack)
{
	setup();
	struct ukpev_event *e = evt_create(A, "p t_stack sp=$stack s0=$stack0 s1=$stack1");
	call_stack();
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	const struct ukpev_event_info *ev = ukpev_reader_event(R, evt_recs[0].r.event);
	uint64_t sp, s0;
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, 0, 0, &sp), 0);
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, 1, 0, &s0), 0);
	/* at the entry sp holds the return address; the frame (pushed rbp) 8 below */
	UKT_EQ(sp, t_frame + 8);
	UKT_EQ(s0, t_ret_addr);
}

static void *unmapped(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(p != MAP_FAILED);
	return p;
}

UKT_CASE(faults)
{
	setup();
	void *bad = unmapped();
	struct ukpev_event *e = evt_create(A, "p t_ptr ok=%di v=+0(%di):u64 s=+0(%di):string "
					   "n=+8(+0(%di)):s32 a=+0(%di):u8[4] after=\\7");
	t_ptr(bad);
	t_ptr(NULL);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 2);
	char want[256];
	snprintf(want, sizeof(want), " ok=%p v=(fault) s=(fault) n=(fault) a=(fault) after=0x7", bad);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), want);
	UKT_STREQ(evt_fmt(R, 1, UKPEV_FMT_FTRACE),
		  " ok=0x0 v=(fault) s=(fault) n=(fault) a=(fault) after=0x7");
}

/* a string that ends just before an unreadable page is read whole; one
 * that runs into it is (fault); a long one is cut at 255 bytes */
UKT_CASE(strings_at_edges)
{
	setup();
	char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(two != MAP_FAILED);
	UKT_EQ(mprotect(two + 4096, 4096, PROT_NONE), 0);
	memset(two, 'a', 4096);
	two[4095] = 0;
	char *end = two + 4096 - 4;	/* "aaa" */
	struct ukpev_event *e = evt_create(A, "p t_ptr s=+0(%di):string");
	t_ptr(end);
	two[4095] = 'z';
	t_ptr(two + 4096 - 8);	/* no NUL before the page */
	t_ptr(two);		/* 4095 bytes and more */
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 3);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), " s=\"aaa\"");
	UKT_STREQ(evt_fmt(R, 1, UKPEV_FMT_FTRACE), " s=(fault)");
	const struct ukpev_event_info *ev = ukpev_reader_event(R, evt_recs[2].r.event);
	const char *s;
	size_t n;
	UKT_EQ(ukpev_value_str(ev, &evt_recs[2].r, 0, &s, &n), 0);
	UKT_EQ(n, UKPEV_STRING_MAX - 1);
	UKT_EQ(strspn(s, "a"), n);
}

NOIL void call_ret(void) { sink += (unsigned long)t_ret(5, 1); }

UKT_CASE(return_probe)
{
	setup();
	struct ukpev_event *e = evt_create(A, "r:t/r t_ret ret=$retval:s64 x=$arg1:u32 y=$arg2 "
					   "ax=%ax:u8");
	UKT_EQ(ukpev_event_info(e)->kind, 'r');
	call_ret();
	t_ret(-1, 0);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 2);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), " ret=16 x=5 y=0x1 ax=16");
	UKT_STREQ(evt_fmt(R, 1, UKPEV_FMT_FTRACE), " ret=-3 x=4294967295 y=0x0 ax=253");
	/* the real return address: into call_ret */
	char sym[128];
	ukpev_symbolize_self(evt_recs[0].r.ret_ip, sym, sizeof(sym), NULL);
	if (strncmp(sym, "call_ret+", 9))
		UKT_FAIL("ret_ip %#lx: %s", evt_recs[0].r.ret_ip, sym);
}

UKT_CASE(percent_return_and_maxactive)
{
	setup();
	struct ukpev_event *e1 = evt_create(A, "p t_ret%return $retval");
	struct ukpev_event *e2 = evt_create(A, "r4:e2 t_ret $retval:s32");
	UKT_STREQ(ukpev_event_info(e1)->event, "r_t_ret_0");
	UKT_EQ(ukpev_event_info(e2)->maxactive, 4);
	call_ret();
	ukpev_event_disable(e1);
	ukpev_event_disable(e2);
	UKT_EQ(evt_drain(R), 2);
	unsigned i1 = evt_recs[0].r.event == ukpev_event_info(e1)->id ? 0 : 1;
	UKT_STREQ(evt_fmt(R, i1, UKPEV_FMT_FTRACE), " arg1=0x10");
	UKT_STREQ(evt_fmt(R, 1 - i1, UKPEV_FMT_FTRACE), " arg1=16");
}

UKT_CASE(json_values)
{
	setup();
	O1 = (struct tobj){ .i = -7, .name = "q\"x", .arr = { 1, 2, 3, 4 } };
	struct ukpev_event *e = evt_create(A, "p t_obj i=+0(%di):s32 n=+4(%di):string "
					   "a=+34(%di):u16[2] x=+0(%di):x32 bad=+0(+24(%di)):u8");
	t_obj(&O1);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_JSON),
		  "\"i\":-7,\"n\":\"q\\\"x\",\"a\":[1,2],\"x\":\"0xfffffff9\",\"bad\":\"(fault)\"");
}

UKT_CASE(default_names)
{
	setup();
	struct ukpev_def *d;
	struct ukpev_error err;
	static const struct { const char *def, *group, *event; } t[] = {
		{ "p malloc", "ukprobes", "p_malloc_0" },
		{ "p libc.so.6:malloc+4", "ukprobes", "p_malloc_4" },
		{ "r libc.so.6:malloc", "ukprobes", "r_malloc_0" },
		{ "p libc.so.6:malloc%return", "ukprobes", "r_malloc_0" },
		{ "p 0x401000", "ukprobes", "p_0x401000" },
		{ "p /usr/lib/libz.so.1:0x1f40", "ukprobes", "p_libz_so_1_0x1f40" },
		{ "p:grp/ev f", "grp", "ev" },
		{ "p:ev f", "ukprobes", "ev" },
		{ "p:grp/ f", "grp", "p_f_0" },
		{ "r10:g/e f", "g", "e" },
	};
	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (ukpev_def_parse(t[i].def, &d, &err))
			UKT_FAIL("%s: %s at %d", t[i].def, ukpev_strerror(err.code), err.offset);
		UKT_STREQ(ukpev_def_info(d)->group, t[i].group);
		UKT_STREQ(ukpev_def_info(d)->event, t[i].event);
		ukpev_def_free(d);
	}
}

UKT_CASE(many_args)
{
	setup();
	char def[8192];
	int n = snprintf(def, sizeof(def), "p t_args");
	for (int i = 0; i < UKPEV_MAX_ARGS; i++)
		n += snprintf(def + n, sizeof(def) - (size_t)n, " v%d=\\%d:u8", i, i);
	struct ukpev_event *e = evt_create(A, def);
	call_args();
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	const struct ukpev_event_info *ev = ukpev_reader_event(R, evt_recs[0].r.event);
	UKT_EQ(ev->nargs, UKPEV_MAX_ARGS);
	for (unsigned i = 0; i < UKPEV_MAX_ARGS; i++) {
		uint64_t v;
		UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, i, 0, &v), 0);
		UKT_EQ(v, i);
	}
	n += snprintf(def + n, sizeof(def) - (size_t)n, " one_more=%%di");
	struct ukpev_error err;
	struct ukpev_def *d;
	UKT_EQ(ukpev_def_parse(def, &d, &err), -EINVAL);
	UKT_EQ(err.code, UKPEV_E_TOO_MANY_ARGS);
	UKT_EQ(err.offset, (int)(strstr(def, "one_more") - def));
}

/* the handlers keep to the general registers: the engine runs them on its
 * lean path (nothing of the vector state saved) */
UKT_CASE(handlers_are_lean)
{
	extern int ukp_opt_handler_check(void *fn, char *why, size_t n);
	extern int ev_pre_handler(struct kprobe *, struct pt_regs *);
	extern int ev_ret_handler(struct kretprobe_instance *, struct pt_regs *);
	extern int ev_entry_handler(struct kretprobe_instance *, struct pt_regs *);
	char why[256];
	void *fns[] = { (void *)ev_pre_handler, (void *)ev_ret_handler, (void *)ev_entry_handler };
	for (unsigned i = 0; i < 3; i++) {
		why[0] = 0;
		if (ukp_opt_handler_check(fns[i], why, sizeof(why)))
			UKT_FAIL("handler %u is not lean: %s", i, why);
	}
}

/* the same function by every form of PLACE: address, OBJ:SYM, OBJ:0xN */
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	unsigned long *io = arg;	/* in: address; out: file offset */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		unsigned long lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && io[0] >= lo && io[0] < lo + p->p_filesz) {
			io[1] = io[0] - lo + p->p_offset;
			return 1;
		}
	}
	return 0;
}

UKT_CASE(every_place_form)
{
	setup();
	unsigned long io[2] = { (unsigned long)&t_ptr, 0 };
	UKT_EQ(dl_iterate_phdr(phdr_cb, io), 1);
	const char *exe = program_invocation_short_name;
	char defs[3][256], name[128];
	snprintf(defs[0], sizeof(defs[0]), "p %#lx a=%%di", (unsigned long)&t_ptr);
	snprintf(defs[1], sizeof(defs[1]), "p %s:t_ptr a=%%di", exe);
	snprintf(defs[2], sizeof(defs[2]), "p %s:%#lx a=%%di", exe, io[1]);
	struct ukpev_event *e[3];
	for (int i = 0; i < 3; i++) {
		e[i] = evt_create(A, defs[i]);
		UKT_EQ(ukpev_event_info(e[i])->addr, (unsigned long)&t_ptr);
	}
	snprintf(name, sizeof(name), "p_%#lx", (unsigned long)&t_ptr);
	UKT_STREQ(ukpev_event_info(e[0])->event, name);
	UKT_STREQ(ukpev_event_info(e[1])->event, "p_t_ptr_0");
	snprintf(name, sizeof(name), "p_%s_%#lx", exe, io[1]);
	for (char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			*c = '_';
	UKT_STREQ(ukpev_event_info(e[2])->event, name);
	t_ptr((void *)0x1234);
	for (int i = 0; i < 3; i++)
		ukpev_event_disable(e[i]);
	UKT_EQ(evt_drain(R), 3);
	for (int i = 0; i < 3; i++)
		UKT_STREQ(evt_fmt(R, (unsigned)i, UKPEV_FMT_FTRACE), " a=0x1234");
}

/* the header of a record: CLOCK_MONOTONIC time, cpu, pid, tid, name */
UKT_CASE(record_header)
{
	setup();
	prctl(PR_SET_NAME, "evt-hdr");
	struct ukpev_event *e = evt_create(A, "p t_ptr");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t_ptr(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* 200 ms (the reader recalibrates after 100): a sleep the engine's
	 * signals may cut short, so to a deadline */
	struct timespec dl = t1;
	dl.tv_nsec += 200000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL))
		;
	t_ptr(NULL);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 2);
	uint64_t a = (uint64_t)t0.tv_sec * 1000000000ULL + (uint64_t)t0.tv_nsec;
	uint64_t b = (uint64_t)t1.tv_sec * 1000000000ULL + (uint64_t)t1.tv_nsec;
	const struct ukpev_record *r = &evt_recs[0].r;
	if (r->ts_ns + 50000 < a || r->ts_ns > b + 50000)
		UKT_FAIL("ts %llu not in [%llu, %llu]", (unsigned long long)r->ts_ns,
			 (unsigned long long)a, (unsigned long long)b);
	if (evt_recs[1].r.ts_ns < b + 200000000ULL - 50000 ||
	    evt_recs[1].r.ts_ns > b + 200000000ULL + 1000000000ULL)
		UKT_FAIL("ts %llu then %llu", (unsigned long long)r->ts_ns,
			 (unsigned long long)evt_recs[1].r.ts_ns);
	UKT_ASSERT(r->cpu < (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	UKT_EQ(r->pid, getpid());
	UKT_EQ(r->tid, (pid_t)syscall(SYS_gettid));
	UKT_STREQ(r->comm, "evt-hdr");
}

UKT_CASE(json_utf8)
{
	setup();
	struct ukpev_event *e = evt_create(A, "p t_ptr s=+0(%di):string");
	t_ptr("caf\xc3\xa9 \xff\x01");
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_JSON), "\"s\":\"caf\xc3\xa9 \\ufffd\\u0001\"");
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), " s=\"caf\xc3\xa9 \xff\x01\"");
}

/* data only in the symbol table (static, not exported) */
static long s_hidden __attribute__((used)) = 4242;

UKT_CASE(unexported_data_symbols)
{
	setup();
	char def[256];
	snprintf(def, sizeof(def), "p t_ptr h=@s_hidden:s64 q=@%s:s_hidden:u16",
		 program_invocation_short_name);
	struct ukpev_event *e = evt_create(A, def);
	t_ptr(NULL);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), " h=4242 q=4242");
	UKT_ASSERT(dlsym(RTLD_DEFAULT, "s_hidden") == NULL);
}

/* a static local's symbol has a '.' (gcc's prev_reloc.64): @SYM:TYPE, not
 * @OBJ:SYM; an object's name has ".so" or a '/' */
static long s_dotted __asm__("s_dotted.64") __attribute__((used)) = 6464;

UKT_CASE(dotted_data_symbols)
{
	setup();
	struct ukpev_event *e = evt_create(A, "p t_ptr d=@s_dotted.64:s32 e=@s_dotted.64+0:u16 "
					  "f=@libc.so.6:environ:x8 g=@s_dotted.64:b4@4/8");
	t_ptr(NULL);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	const char *got = evt_fmt(R, 0, UKPEV_FMT_FTRACE);
	UKT_ASSERT(!strncmp(got, " d=6464 e=6464 f=0x", 19));
	UKT_ASSERT(strstr(got, " g=4"));	/* 6464 = 0x1940: bits 4..7 */
	(void)s_dotted;
}

/* the remaining types and @SYM-OFFS */
struct { long a, b; } g_pair = { -31, 32 };
NOIL void t_obj2(struct tobj *o, const void *p)
{
	sink = (unsigned long)o + (unsigned long)p;
}
__asm__(".globl g_pair_b\n.set g_pair_b, g_pair+8\n");

UKT_CASE(more_types)
{
	setup();
	O1 = (struct tobj){ .i = -7, .name = "uname", .str = pstr };
	struct ukpev_event *e = evt_create(A, "p t_obj2 x8=+0(%di):x8 us=+4(%di):ustring "
					   "ss=%si:symstr a=@g_pair_b-8:s64 b=@g_pair_b:s64 "
					   "u16=+0(%di):u16 s16=+0(%di):s16 u32=+0(%di):u32");
	UKT_EQ(ukpev_event_info(e)->args[2].type, UKPEV_T_SYMSTR);
	char want[256], sym[128];
	void *fn = (char *)(void *)&t_args + 1;
	ukpev_symbolize_self((unsigned long)fn, sym, sizeof(sym), NULL);
	t_obj2(&O1, fn);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	snprintf(want, sizeof(want), " x8=0xf9 us=\"uname\" ss=\"%s\" a=-31 b=32 u16=65529 "
		 "s16=-7 u32=4294967289", sym);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), want);
	snprintf(want, sizeof(want), "\"x8\":\"0xf9\",\"us\":\"uname\",\"ss\":\"%s\",\"a\":-31,"
		 "\"b\":32,\"u16\":65529,\"s16\":-7,\"u32\":4294967289", sym);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_JSON), want);
}

/* string[N]: N pointers to strings (an argv) */
UKT_CASE(string_arrays)
{
	setup();
	const char *argv[] = { "one", "two", (const char *)unmapped(), NULL };
	struct ukpev_event *e = evt_create(A, "p t_ptr a=+0(%di):string[3] b=+8(%di):ustring[1]");
	t_ptr(argv);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_FTRACE), " a={\"one\",\"two\",(fault)} b={\"two\"}");
	UKT_STREQ(evt_fmt(R, 0, UKPEV_FMT_JSON), "\"a\":[\"one\",\"two\",\"(fault)\"],\"b\":[\"two\"]");
	const struct ukpev_event_info *ev = ukpev_reader_event(R, evt_recs[0].r.event);
	const char *s;
	size_t n;
	UKT_EQ(ukpev_value_str_at(ev, &evt_recs[0].r, 0, 1, &s, &n), 0);
	UKT_EQ(n, 3);
	UKT_ASSERT(!memcmp(s, "two", 3));
	UKT_EQ(ukpev_value_str_at(ev, &evt_recs[0].r, 0, 2, &s, &n), -EFAULT);
	UKT_EQ(ukpev_value_str_at(ev, &evt_recs[0].r, 0, 3, &s, &n), -EINVAL);
}

/* without the TSC: CLOCK_MONOTONIC read by the handler */
UKT_CASE(monotonic_clock_fallback)
{
	setenv("UKPROBES_EVENTS_CLOCK", "mono", 1);
	setup();
	struct ukpev_event *e = evt_create(A, "p t_ptr");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t_ptr(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), 1);
	uint64_t a = (uint64_t)t0.tv_sec * 1000000000ULL + (uint64_t)t0.tv_nsec;
	uint64_t b = (uint64_t)t1.tv_sec * 1000000000ULL + (uint64_t)t1.tv_nsec;
	UKT_ASSERT(evt_recs[0].r.ts_ns >= a && evt_recs[0].r.ts_ns <= b);
}

/* the cpu without rseq: rdpid, else rdtscp */
extern int ev_cpu_mode;
static void *one_ptr(void *arg)
{
	(void)arg;
	t_ptr(NULL);
	return NULL;
}

UKT_CASE(cpu_without_rseq)
{
	setup();
	struct ukpev_event *e = evt_create(A, "p t_ptr");
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_CONF);
	unsigned ca, cb, cc, cd;
	bool rdpid = __get_cpuid_count(7, 0, &ca, &cb, &cc, &cd) && (cc & (1u << 22));
	for (int mode = rdpid ? 1 : 2; mode <= 2; mode++) {
		ev_cpu_mode = mode;	/* for threads' first events from now */
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, one_ptr, NULL), 0);
		pthread_join(th, NULL);
	}
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(R), rdpid ? 2 : 1);
	for (unsigned i = 0; i < evt_n; i++)
		UKT_ASSERT(evt_recs[i].r.cpu < ncpu);
}
