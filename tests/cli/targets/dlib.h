/* targets/dlib.c's interface */
struct dl_item {
	int id;
	const char *name;
};

long dlib_scale(const struct dl_item *it, long k);
