/* SPDX-License-Identifier: MIT */
#ifndef UKPROBE_OPTS_H
#define UKPROBE_OPTS_H
#include <stdio.h>
#include "cli.h"
#define UKP_STR_(x) #x
#define UKP_STR(x) UKP_STR_(x)
/* 0: parsed; -1: --help written (exit 0); 2: bad usage (written) */
int trace_parse(int argc, char **argv, struct trace_opts *t);
void trace_usage(FILE *f);
#endif
