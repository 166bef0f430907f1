#ifndef HALCYON_CJANSSON_SHIM_H
#define HALCYON_CJANSSON_SHIM_H
// jansson's type tests are function-like macros, which Swift does not import;
// these inline wrappers make them callable.
#include <jansson.h>

static inline int hc_json_typeof(const json_t *j) { return (int)json_typeof(j); }
static inline int hc_json_is_object(const json_t *j) { return json_is_object(j); }
static inline int hc_json_is_array(const json_t *j) { return json_is_array(j); }
static inline int hc_json_is_string(const json_t *j) { return json_is_string(j); }
static inline int hc_json_is_integer(const json_t *j) { return json_is_integer(j); }
static inline int hc_json_is_real(const json_t *j) { return json_is_real(j); }
static inline int hc_json_is_number(const json_t *j) { return json_is_number(j); }
static inline int hc_json_is_true(const json_t *j) { return json_is_true(j); }
static inline int hc_json_is_false(const json_t *j) { return json_is_false(j); }
static inline int hc_json_is_boolean(const json_t *j) { return json_is_boolean(j); }
static inline int hc_json_is_null(const json_t *j) { return json_is_null(j); }
static inline json_t *hc_json_boolean(int v) { return json_boolean(v); }

#endif
