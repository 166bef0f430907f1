// jemalloc, the daemon's malloc (see Sources/halcyond/Allocator.swift for why).
#include <jemalloc/jemalloc.h>
