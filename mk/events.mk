# Dynamic events (src/events/, <ukprobes/events.h>): the definition and
# filter parsers, fetch programs, record buffers.  Read by the top
# Makefile before its first rule, so LIB_OBJS here reaches $(SO) and
# $(AR_LIB).
EV_SRCS := $(wildcard src/events/*.c)
EV_OBJS := $(patsubst %.c,$(B)/%.o,$(EV_SRCS))
LIB_OBJS += $(EV_OBJS)
$(EV_OBJS): $(wildcard src/events/*.h)
