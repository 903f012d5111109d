/* core/dtype.h - scalar conversions between fp32 and the 16-bit storage types, round to nearest
 * even, NaN preserved; identical on every compiler (bit manipulation, no _Float16). */
#ifndef VC_CONV_DTYPE_H
#define VC_CONV_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "voxconv.h"

static inline uint32_t vc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float vc_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float vc_bf16_to_f32(uint16_t h) { return vc_bits_f32((uint32_t)h << 16); }

static inline uint16_t vc_f32_to_bf16(float f)
{
    uint32_t u = vc_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float vc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return vc_bits_f32(u);
}

static inline uint16_t vc_f32_to_f16(float f)
{
    uint32_t u = vc_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow (rounds) to inf */
    if (a < 0x38800000u) { /* result subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15, mantissa still 23 bits */
    uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

/* Loads element i of a feature buffer of any float dtype as fp32. */
static inline float vc_load_f32(const void *p, vc_dtype t, int64_t i)
{
    switch (t) {
    case VC_DTYPE_FP16: return vc_f16_to_f32(((const uint16_t *)p)[i]);
    case VC_DTYPE_BF16: return vc_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* Stores fp32 v as element i of a buffer of any float dtype. */
static inline void vc_store_f32(void *p, vc_dtype t, int64_t i, float v)
{
    switch (t) {
    case VC_DTYPE_FP16: ((uint16_t *)p)[i] = vc_f32_to_f16(v); break;
    case VC_DTYPE_BF16: ((uint16_t *)p)[i] = vc_f32_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

/* "fp32", "fp16", "bf16", "int32" or "?" (for messages). */
static inline const char *vc_dtype_name(vc_dtype t)
{
    switch (t) {
    case VC_DTYPE_FP32: return "fp32";
    case VC_DTYPE_FP16: return "fp16";
    case VC_DTYPE_BF16: return "bf16";
    case VC_DTYPE_INT32: return "int32";
    default: return "?";
    }
}

static inline int vc_is_float_dtype(vc_dtype t)
{
    return t == VC_DTYPE_FP32 || t == VC_DTYPE_FP16 || t == VC_DTYPE_BF16;
}

#endif
