/* SPDX-License-Identifier: MIT */
/*
 * --format=json: Chrome trace events, {"traceEvents":[...]}: one "ph":"i"
 * (thread-scoped instant) per record, ts in microseconds of
 * CLOCK_MONOTONIC, and "ph":"M" metadata naming the process and each
 * thread as it first appears.
 */
#include <stdlib.h>
#include <string.h>

#include "output.h"

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void sep(struct writer *w)
{
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = 0;
}

void fmt_json_header(struct writer *w)
{
	if (!w->buf) {
		w->cap = 4096;
		w->buf = malloc(w->cap);
	}
	w->first = 1;
	fputs("{\"traceEvents\":[", w->f);
}

/* process ids are kept as -pid beside the thread ids */
static int seen(struct writer *w, pid_t id)
{
	for (size_t k = 0; k < w->nnamed; k++)
		if (w->named[k] == id)
			return 1;
	if (w->nnamed == w->capnamed) {
		w->capnamed = w->capnamed ? 2 * w->capnamed : 16;
		w->named = realloc(w->named, w->capnamed * sizeof *w->named);
		if (!w->named)
			abort();
	}
	w->named[w->nnamed++] = id;
	return 0;
}

static void meta(struct writer *w, const char *what, pid_t pid, pid_t tid, const char *name)
{
	sep(w);
	fprintf(w->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
		what, (int)pid, (int)tid);
	json_str(w->f, name);
	fputs("}}", w->f);
}

static void name_thread(struct writer *w, const struct ukpev_record *rec)
{
	const char *comm = rec->comm ? rec->comm : "";
	/* a process is named after its main thread's name where that
	 * records, else after its first thread's */
	if (!seen(w, -rec->pid))
		meta(w, "process_name", rec->pid, rec->pid, comm);
	if (!seen(w, rec->tid))
		meta(w, "thread_name", rec->pid, rec->tid, comm);
}

void fmt_json_record(struct writer *w, const struct ukpev_event_info *ev,
		     const struct ukpev_record *rec)
{
	name_thread(w, rec);
	sep(w);
	if (rec->event == UKPEV_EVENT_LOST) {
		fprintf(w->f, "{\"name\":\"LOST\",\"cat\":\"ukprobe\",\"ph\":\"i\",\"s\":\"t\","
			"\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,\"args\":{\"events\":%llu}}",
			(unsigned long long)(rec->ts_ns / 1000), (unsigned long long)(rec->ts_ns % 1000),
			(int)rec->pid, (int)rec->tid, (unsigned long long)rec->lost);
		return;
	}
	fputs("{\"name\":", w->f);
	json_str(w->f, ev->event);
	fputs(",\"cat\":", w->f);
	json_str(w->f, ev->group);
	fprintf(w->f, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,\"args\":{%s}}",
		(unsigned long long)(rec->ts_ns / 1000), (unsigned long long)(rec->ts_ns % 1000),
		(int)rec->pid, (int)rec->tid, fmt_args(w, ev, rec, UKPEV_FMT_JSON));
}

void fmt_json_end(struct writer *w)
{
	fputs("\n]}\n", w->f);
	fflush(w->f);
}

void fmt_json_stack(struct writer *w, const struct ukpev_event_info *ev,
		    const struct ukpev_record *rec)
{
	char name[1024];
	name_thread(w, rec);
	sep(w);
	fputs("{\"name\":\"<stack trace>\",\"cat\":", w->f);
	json_str(w->f, ev->group);
	fprintf(w->f, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,"
		"\"args\":{\"event\":", (unsigned long long)(rec->ts_ns / 1000),
		(unsigned long long)(rec->ts_ns % 1000), (int)rec->pid, (int)rec->tid);
	json_str(w->f, ev->event);
	fputs(",\"stack\":[", w->f);
	const uint64_t *fr = rec->payload;
	for (unsigned i = 0; i < rec->payload_size / 8; i++) {
		sym_format(w->sym, (unsigned long)fr[i], 1, 1, name, sizeof name);
		if (i)
			fputc(',', w->f);
		json_str(w->f, name);
	}
	fputs("]}}", w->f);
}
