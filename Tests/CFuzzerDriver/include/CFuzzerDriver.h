// libFuzzer's driver, declared for Swift. The definition comes from the fuzzer runtime that
// -sanitize=fuzzer links in; ordinary builds never reference it (halcyon-fuzz calls it only
// under -DFUZZING), so they link without that runtime.
#ifndef C_FUZZER_DRIVER_H
#define C_FUZZER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv,
                        int (*callback)(const uint8_t *data, size_t size));

#endif
