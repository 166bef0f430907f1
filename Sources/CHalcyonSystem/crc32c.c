// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the disk tier's
// file header and of every journal record. Two implementations behind one entry point:
// the SSE4.2 `crc32` instruction when the CPU has it (checked once, at first use), and
// a portable slicing-by-8 table walk otherwise. Both give identical results; the tests
// compare them against the RFC 3720 vectors.
#include "CHalcyonSystem.h"
#include <pthread.h>
#include <string.h>

static uint32_t crc_table[8][256];
static int crc_use_hardware;
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
__attribute__((target("sse4.2")))
static uint32_t crc_hardware(uint32_t crc, const unsigned char *p, size_t length) {
    uint64_t c = ~crc;
    while (length > 0 && ((uintptr_t)p & 7) != 0) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        length--;
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
