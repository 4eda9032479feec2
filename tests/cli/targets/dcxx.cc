/* C++ names for the DWARF tests: a method of a class in a namespace, a
 * function in a nested namespace and one of the same name outside; each
 * prints what the tests read. */
#include <cstdio>

namespace geo {
struct Point {
	long x, y;
};

class Shape {
public:
	explicit Shape(int sides) : sides_(sides), scale_(1) {}
	__attribute__((noinline)) long area(long w, const Point &at);
	int sides_;
	int scale_;
};

long Shape::area(long w, const Point &at)
{
	long a = w * sides_ * scale_ + at.x;
	std::printf("area sides=%d w=%ld x=%ld y=%ld a=%ld\n", sides_, w, at.x, at.y, a);
	return a;
}

namespace inner {
__attribute__((noinline)) int twice(int v)
{
	std::printf("twice v=%d\n", v);
	return 2 * v;
}
}
}

__attribute__((noinline)) int twice(int v)	/* the same name, global */
{
	std::printf("gtwice v=%d\n", v);
	return 2 * v + 1;
}

int main(int argc, char **)
{
	geo::Shape s(3 + argc);
	geo::Point p = { 10 * argc, -4 };
	long r = s.area(7, p);
	r += geo::inner::twice(argc + 20);
	r += twice(argc + 30);
	std::printf("main r=%ld\n", r);
	return 0;
}
