/* A program whose locals, parameters, fields, elements, enums and
 * bitfields the DWARF tests read at the lines marked MARK, comparing what
 * ukprobe fetches with what it prints there. */
#include <stdio.h>

enum color { RED = 1, GREEN = 7, BLUE = -3 };

struct inner {
	long deep;
};

struct rec {
	int id;
	short small;
	unsigned flag : 3;
	unsigned level : 5;
	enum color col;
	struct inner in;
	struct inner *pin;
	int vals[4];
	char name[16];
};

long total = 40;

static inline int scaled(int v, int f)	/* inlined into work at -O2 */
{
	int s = v * f;
	return s + 1;
}

__attribute__((noinline)) int work(struct rec *r, int k)
{
	int sum = r->id + k;
	printf("work id=%d k=%d sum=%d small=%d flag=%u level=%u col=%d deep=%ld v2=%d\n", /* MARK work */
	       r->id, k, sum, r->small, r->flag, r->level, (int)r->col,
	       r->pin->deep, r->vals[2]);
	return scaled(sum, k);
}

int main(int argc, char **argv)
{
	(void)argv;
	struct inner i2 = { .deep = 123456789012L };
	struct rec r = { .id = 17 + argc, .small = -5, .flag = 5, .level = 21,
			 .col = BLUE, .in = { -9 }, .pin = &i2,
			 .vals = { 10, 20, 30, 40 }, .name = "alpha" };
	int res = 0;
	for (int k = 1; k <= 2; k++)
		res += work(&r, k);
	printf("main res=%d id=%d deep=%ld total=%ld\n", res, r.id, r.in.deep, total); /* MARK main */
	return 0;
}
