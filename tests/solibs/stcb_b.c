/* tests/solibs/stcb.inc with a large frame */
#define FRAME 80
#include "stcb.inc"
