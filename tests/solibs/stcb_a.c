/* tests/solibs/stcb.inc with a small frame */
#define FRAME 16
#include "stcb.inc"
