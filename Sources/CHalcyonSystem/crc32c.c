// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the disk tier's
// file header and of every journal record. Two implementations behind one entry point:
// the SSE4.2 `crc32` instruction when the CPU has it (checked once, at first use), and
// a portable slicing-by-8 table walk otherwise. Both give identical results; the tests
// compare them against the RFC 3720 vectors.
//
// The instruction takes three cycles to give its result and can start one every cycle,
// so one chain of it runs at a third of its speed. Past a few hundred bytes the hardware
// path runs three chains over three adjacent blocks and joins them: the register of a
// CRC is linear in its starting value, so the checksum of A then B equals A's register
// advanced over |B| zero bytes, XOR B's own register from zero. "Advanced over n zero
// bytes" is a fixed linear map of 32 bits, kept as four 256-entry tables per block size
// (`crc_zeros_*`), applied with four loads.
#include "CHalcyonSystem.h"
#include <pthread.h>
#include <string.h>

static uint32_t crc_table[8][256];
static int crc_use_hardware;

/// Block sizes of the three-chain path: long blocks for large buffers, short ones for
/// buffers of a few KiB (a disk-tier value), each a multiple of 8.
enum { CRC_LONG = 2048, CRC_SHORT = 256 };
/// `crc_zeros_long[k][b]`: the register whose byte k is b, the others zero, advanced
/// over CRC_LONG zero bytes (the same for CRC_SHORT).
static uint32_t crc_zeros_long[4][256];
static uint32_t crc_zeros_short[4][256];

/// Fills `table` with the map "advance the register over `n` zero bytes": first the
/// image of each of the 32 single-bit registers, then each byte value as the XOR of
/// the images of its bits.
static void crc_zeros_init(uint32_t table[4][256], size_t n) {
    uint32_t image[32];
    for (int bit = 0; bit < 32; bit++) {
        uint32_t c = (uint32_t)1 << bit;
        for (size_t i = 0; i < n; i++) c = crc_table[0][c & 0xff] ^ (c >> 8);
        image[bit] = c;
    }
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1u << bit)) c ^= image[8 * k + bit];
            table[k][b] = c;
        }
    }
}
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
    crc_zeros_init(crc_zeros_long, CRC_LONG);
    crc_zeros_init(crc_zeros_short, CRC_SHORT);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    crc_use_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    crc_use_hardware = 0;
#endif
}

uint32_t hc_crc32c_portable(uint32_t crc, const void *buffer, size_t length) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = buffer;
    uint32_t c = ~crc;
    while (length > 0 && ((uintptr_t)p & 7) != 0) {
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);  // little-endian hosts only: the tables assume it
        uint32_t lo = (uint32_t)word ^ c;
        uint32_t hi = (uint32_t)(word >> 32);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        length -= 8;
    }
    while (length > 0) {
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        length--;
    }
    return ~c;
}

#if defined(__x86_64__)
/// The register `c` advanced over the zero bytes whose map `table` holds.
static inline uint32_t crc_advance(const uint32_t table[4][256], uint32_t c) {
    return table[0][c & 0xff] ^ table[1][(c >> 8) & 0xff] ^ table[2][(c >> 16) & 0xff] ^ table[3][c >> 24];
}

/// Runs three chains over the three blocks of `block` bytes at `*p` and returns the
/// register `c` advanced over all of them; moves `*p` past them.
__attribute__((target("sse4.2")))
static inline uint64_t crc_three_blocks(uint64_t c, const unsigned char **p, size_t block,
                                        const uint32_t zeros[4][256]) {
    const unsigned char *a = *p, *b = a + block, *d = b + block;
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < block; i += 8) {
        uint64_t wa, wb, wd;
        memcpy(&wa, a + i, 8);
        memcpy(&wb, b + i, 8);
        memcpy(&wd, d + i, 8);
        c = __builtin_ia32_crc32di(c, wa);
        c1 = __builtin_ia32_crc32di(c1, wb);
        c2 = __builtin_ia32_crc32di(c2, wd);
    }
    *p = d + block;
    return crc_advance(zeros, crc_advance(zeros, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2")))
static uint32_t crc_hardware(uint32_t crc, const unsigned char *p, size_t length) {
    uint64_t c = ~crc;
    while (length > 0 && ((uintptr_t)p & 7) != 0) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        length--;
    }
    while (length >= 3 * CRC_LONG) {
        c = crc_three_blocks(c, &p, CRC_LONG, crc_zeros_long);
        length -= 3 * CRC_LONG;
    }
    while (length >= 3 * CRC_SHORT) {
        c = crc_three_blocks(c, &p, CRC_SHORT, crc_zeros_short);
        length -= 3 * CRC_SHORT;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        length -= 8;
    }
    while (length > 0) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        length--;
    }
    return ~(uint32_t)c;
}
#endif

int hc_crc32c_is_hardware(void) {
    pthread_once(&crc_once, crc_init);
    return crc_use_hardware;
}

uint32_t hc_crc32c(uint32_t crc, const void *buffer, size_t length) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_use_hardware) return crc_hardware(crc, buffer, length);
#endif
    return hc_crc32c_portable(crc, buffer, length);
}
