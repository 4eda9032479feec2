/* SPDX-License-Identifier: MIT */
/*
 * ukprobes: the kernel's kprobes, kretprobes, jprobes and ftrace hooks for
 * user-space programs on Linux x86-64.  Including this header brings in the
 * whole public contract (see API.md).
 */
#ifndef UKPROBES_H
#define UKPROBES_H

#include <ukprobes/ptrace.h>
#include <ukprobes/kprobes.h>
#include <ukprobes/ftrace.h>
#include <ukprobes/stacktrace.h>
#include <ukprobes/events.h>

#endif
