/* C++ names for the DWARF tests: a method of a class in a namespace, a
 * function in a nested namespace and one of the same name outside,
 * operators (members and a free one), a conversion operator, a class
 * template's method and a function template, each instantiated twice, and
 * one instantiated on a type of two words; each prints what the tests
 * read. */
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

struct Vec {
	long x, y;
	__attribute__((noinline)) Vec operator+(const Vec &o) const;
	__attribute__((noinline)) bool operator==(const Vec &o) const;
	__attribute__((noinline)) long operator()(long k) const;
	__attribute__((noinline)) long operator[](int i) const;
	__attribute__((noinline)) explicit operator bool() const;
};

Vec Vec::operator+(const Vec &o) const
{
	std::printf("plus x=%ld y=%ld ox=%ld oy=%ld\n", x, y, o.x, o.y);
	return Vec{ x + o.x, y + o.y };
}

bool Vec::operator==(const Vec &o) const
{
	std::printf("eq x=%ld ox=%ld\n", x, o.x);
	return x == o.x && y == o.y;
}

long Vec::operator()(long k) const
{
	std::printf("call k=%ld y=%ld\n", k, y);
	return k * x + y;
}

long Vec::operator[](int i) const
{
	std::printf("index i=%d\n", i);
	return i ? y : x;
}

Vec::operator bool() const
{
	std::printf("bool x=%ld y=%ld\n", x, y);
	return x != y;
}

__attribute__((noinline)) long operator<<(const Vec &v, int s)
{
	std::printf("shl s=%d x=%ld\n", s, v.x);
	return v.x << s;
}

template <typename T> struct Box {
	T v;
	__attribute__((noinline)) T get(T add) const
	{
		std::printf("get%zu v=%ld add=%ld\n", sizeof(T), (long)v, (long)add);
		return v + add;
	}
};

template <typename T> __attribute__((noinline)) T maxof(T a, T b)
{
	std::printf("max%zu a=%ld b=%ld\n", sizeof(T), (long)a, (long)b);
	return a > b ? a : b;
}

template <typename T> __attribute__((noinline)) T minof(T a, T b)
{
	std::printf("min a=%lu b=%lu\n", (unsigned long)a, (unsigned long)b);
	return a < b ? a : b;
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
	geo::Vec a = { argc + 1, 5 }, b = { 3, argc + 8 };
	geo::Vec c = a + b;
	r += (c == a) + c(argc + 2) + a[argc] + (b << (argc + 2));
	geo::Box<int> bi = { 40 + argc };
	geo::Box<long> bl = { 50L + argc };
	r += bi.get(argc + 3) + bl.get(argc + 4);
	r += geo::maxof<long>(argc + 60, 58) + geo::maxof<int>(argc + 70, 65);
	if (a)
		r += (long)geo::minof<unsigned long>(argc + 80, 75);
	std::printf("main r=%ld\n", r);
	return 0;
}
