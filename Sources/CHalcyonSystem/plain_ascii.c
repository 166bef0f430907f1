// The scan behind the reply writer's plain-string path: whether a run of bytes can be
// written inside a JSON string as it is (every byte ASCII, none below 0x20, no `"`, no
// `\`). On x86-64, 64 bytes per step with AVX2 when the CPU has it (checked once, at
// first use) and 32 with SSE2 otherwise; eight bytes per step with word arithmetic on
// other CPUs. Every variant gives the same answer; the tests compare them byte by byte.
#include "CHalcyonSystem.h"
#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static int plain_byte(unsigned char b) {
    return b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
}

static int plain_tail(const unsigned char *p, size_t i, size_t length) {
    for (; i < length; i++) {
        if (!plain_byte(p[i])) return 0;
    }
    return 1;
}

int hc_json_plain_ascii_portable(const void *bytes, size_t length) {
    const unsigned char *p = bytes;
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        uint64_t q = w ^ (ones * '"'), s = w ^ (ones * '\\');
        uint64_t bad = w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((s - ones) & ~s);
        if (bad & highs) return 0;
    }
    return plain_tail(p, i, length);
}

// As signed bytes, 0x80...0xFF are negative: one "less than 0x20" catches them too.
// Each variant hands what is left after its widest step to the next narrower one.
#if defined(__x86_64__)
// The bytes of `a` that may not stand in a JSON string as they are: 0xFF in each.
static inline __m128i unplain16(__m128i a) {
    return _mm_or_si128(_mm_cmplt_epi8(a, _mm_set1_epi8(0x20)),
                        _mm_or_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8('"')), _mm_cmpeq_epi8(a, _mm_set1_epi8('\\'))));
}

__attribute__((target("avx2")))
static inline __m256i unplain32(__m256i a) {
    return _mm256_or_si256(_mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), a),
                           _mm256_or_si256(_mm256_cmpeq_epi8(a, _mm256_set1_epi8('"')),
                                           _mm256_cmpeq_epi8(a, _mm256_set1_epi8('\\'))));
}

static int plain_sse2(const unsigned char *p, size_t length) {
    size_t i = 0;
    for (; i + 32 <= length; i += 32) {
        __m128i bad = _mm_or_si128(unplain16(_mm_loadu_si128((const __m128i *)(p + i))),
                                   unplain16(_mm_loadu_si128((const __m128i *)(p + i + 16))));
        if (_mm_movemask_epi8(bad)) return 0;
    }
    if (i + 16 <= length) {
        if (_mm_movemask_epi8(unplain16(_mm_loadu_si128((const __m128i *)(p + i))))) return 0;
        i += 16;
    }
    return hc_json_plain_ascii_portable(p + i, length - i);
}

__attribute__((target("avx2")))
static int plain_avx2(const unsigned char *p, size_t length) {
    size_t i = 0;
    for (; i + 64 <= length; i += 64) {
        __m256i bad = _mm256_or_si256(unplain32(_mm256_loadu_si256((const __m256i *)(p + i))),
                                      unplain32(_mm256_loadu_si256((const __m256i *)(p + i + 32))));
        if (!_mm256_testz_si256(bad, bad)) return 0;
    }
    // Clear the vector registers' upper halves before SSE code runs: left dirty, every
    // SSE instruction after them pays a merge with them.
    _mm256_zeroupper();
    return plain_sse2(p + i, length - i);
}

static int use_avx2;
static pthread_once_t plain_once = PTHREAD_ONCE_INIT;

static void plain_init(void) {
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
}
#endif

int hc_json_plain_ascii(const void *bytes, size_t length) {
#if defined(__x86_64__)
    pthread_once(&plain_once, plain_init);
    return use_avx2 ? plain_avx2(bytes, length) : plain_sse2(bytes, length);
#else
    return hc_json_plain_ascii_portable(bytes, length);
#endif
}

int hc_json_plain_ascii_sse2(const void *bytes, size_t length) {
#if defined(__x86_64__)
    return plain_sse2(bytes, length);
#else
    return hc_json_plain_ascii_portable(bytes, length);
#endif
}
