/* Smith-Waterman scores, many targets at once in AVX-512 lanes (kernels/sw_simd.py says why).
 *
 * The inter-sequence layout of SWIPE and Opal (Rognes 2011; Korpar and Sikic 2015): each SIMD
 * lane holds a different target, the query runs down the rows, every cell of a column is one
 * vector operation for 64 targets (8 bits) or 32 (16 bits). A column's scores for every query
 * letter come from one byte permute of the substitution row by the lanes' target letters
 * (AVX512-VBMI), so there is no per-lane gather.
 *
 * Rules:
 * - Gap of length L costs gap_open + (L - 1) * gap_extend (parasail's and Opal's convention).
 * - 8 bits first, saturating; a lane whose best reaches 127 is redone in 16 bits with the other
 *   saturated targets of that query; one that reaches 32767 there is reported as -1 and the
 *   caller scores it exactly.
 * - A lane past its target's end reads the pad letter (code 31), which scores -128 (-32768)
 *   against everything: its cells can only decay, so the lane's best is unchanged.
 * - Letter codes are below 31 (the caller checks; protein and DNA matrices have 24 and 16).
 *
 * Loaded through ctypes (which releases the GIL during a call); the module init below only lets
 * setuptools build it as an extension of the package.
 */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PAD 31

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* One query against one batch of targets in lanes of width W (epi8: 64 lanes, epi16: 32).
   cols: ncols columns of the lanes' letter codes (bytes), read by LOAD_COL(j); best: the lanes'
   best scores (the width's maximum = saturated). One body for both widths, by macro. */
#define SW_BATCH(NAME, W, BEST_T, LOWEST, LOAD_COL)                                          \
TARGET static void NAME(const __m512i *rows, int nalpha, const uint8_t *q, int64_t m,       \
                        const uint8_t *cols, int64_t ncols, int go, int ge,                 \
                        __m512i *H, __m512i *E, __m512i *S, BEST_T *best)                   \
{                                                                                           \
    const __m512i vgo = _mm512_set1_##W(go), vge = _mm512_set1_##W(ge);                    \
    const __m512i zero = _mm512_setzero_si512(), low = _mm512_set1_##W(LOWEST);            \
    for (int64_t i = 0; i < m; i++) { H[i] = zero; E[i] = low; }                            \
    __m512i vmax = zero;                                                                    \
    for (int64_t j = 0; j < ncols; j++) {                                                   \
        __m512i t = LOAD_COL(j);                                                            \
        for (int a = 0; a < nalpha; a++) S[a] = _mm512_permutexvar_##W(t, rows[a]);        \
        __m512i diag = zero, up = zero, f = low;                                            \
        for (int64_t i = 0; i < m; i++) {                                                   \
            __m512i left = H[i];                                                            \
            __m512i e = _mm512_max_##W(_mm512_subs_##W(E[i], vge),                          \
                                       _mm512_subs_##W(left, vgo));                         \
            f = _mm512_max_##W(_mm512_subs_##W(f, vge), _mm512_subs_##W(up, vgo));          \
            __m512i h = _mm512_max_##W(_mm512_adds_##W(diag, S[q[i]]), zero);              \
            h = _mm512_max_##W(h, _mm512_max_##W(e, f));                                   \
            diag = left;                                                                    \
            H[i] = h; E[i] = e; up = h;                                                     \
            vmax = _mm512_max_##W(vmax, h);                                                 \
        }                                                                                   \
    }                                                                                       \
    _mm512_storeu_si512((void *)best, vmax);                                                \
}

#define COL8(j) _mm512_loadu_si512((const void *)(cols + (j) * 64))
#define COL16(j) _mm512_cvtepu8_epi16(_mm256_loadu_si256((const void *)(cols + (j) * 32)))
SW_BATCH(batch8, epi8, int8_t, -128, COL8)
SW_BATCH(batch16, epi16, int16_t, -32768, COL16)

/* The longest of targets idx[0..n): a batch's number of columns. */
static int64_t longest(const int64_t *toff, const int32_t *idx, int n)
{
    int64_t len = 0;
    for (int l = 0; l < n; l++) {
        int64_t k = toff[idx[l] + 1] - toff[idx[l]];
        if (k > len) len = k;
    }
    return len;
}

/* Lay out targets idx[0..n) (n <= lanes) as columns of `lanes` letter codes, pad beyond ends. */
static int64_t columns(const uint8_t *tc, const int64_t *toff, const int32_t *idx, int n,
                       int lanes, uint8_t *cols)
{
    int64_t len = longest(toff, idx, n);
    memset(cols, PAD, (size_t)(len * lanes));
    for (int l = 0; l < n; l++) {
        const uint8_t *t = tc + toff[idx[l]];
        int64_t k = toff[idx[l] + 1] - toff[idx[l]];
        for (int64_t j = 0; j < k; j++) cols[j * lanes + l] = t[j];
    }
    return len;
}

int sw_simd_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
}

/* Scores of every query against every target: out[i * nt + k] for query i, target k; -1 where
   even 16 bits saturate. matrix: nalpha x nalpha int32 (values in -127..127). Targets are taken
   in `order` (sorted by length: lanes of a batch end together). Returns 0, or -1 when memory
   runs out. */
TARGET int sw_simd_scores(const int32_t *matrix, int nalpha,
                          const uint8_t *qc, const int64_t *qoff, int nq,
                          const uint8_t *tc, const int64_t *toff, const int32_t *order, int nt,
                          int go, int ge, int32_t *out)
{
    __m512i rows8[32], rows16[32];
    int8_t r8[64] __attribute__((aligned(64)));
    int16_t r16[32] __attribute__((aligned(64)));
    for (int a = 0; a < 32; a++) {  /* row a: letter a's score against each code; pad: lowest */
        for (int b = 0; b < 64; b++)
            r8[b] = (a < nalpha && b < nalpha) ? (int8_t)matrix[a * nalpha + b] : -128;
        for (int b = 0; b < 32; b++)
            r16[b] = (a < nalpha && b < nalpha) ? (int16_t)matrix[a * nalpha + b] : -32768;
        rows8[a] = _mm512_load_si512((const void *)r8);
        rows16[a] = _mm512_load_si512((const void *)r16);
    }
    int nb = (nt + 63) / 64;
    int64_t mmax = 0, tmax = 0, total = 0;
    for (int i = 0; i < nq; i++) if (qoff[i + 1] - qoff[i] > mmax) mmax = qoff[i + 1] - qoff[i];
    /* every batch's columns, laid out once for all queries */
    int64_t *boff = malloc(sizeof(int64_t) * (nb + 1));
    int64_t *blen = malloc(sizeof(int64_t) * (nb + 1));
    if (!boff || !blen) {
        free(boff); free(blen);
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        blen[b] = longest(toff, order + b * 64, nt - b * 64 < 64 ? nt - b * 64 : 64);
        boff[b] = total; total += blen[b] * 64;
        if (blen[b] > tmax) tmax = blen[b];  /* the longest target: the 16-bit batches' room */
    }
    uint8_t *cols = malloc((size_t)total + 64);
    uint8_t *cols16 = malloc((size_t)tmax * 32 + 64);
    __m512i *buf = aligned_alloc(64, sizeof(__m512i) * (size_t)(2 * mmax + 64));
    int32_t *sat = malloc(sizeof(int32_t) * (size_t)(nt + 1));
    if (!cols || !cols16 || !buf || !sat) {
        free(boff); free(blen); free(cols); free(cols16); free(buf); free(sat);
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        int n = nt - b * 64 < 64 ? nt - b * 64 : 64;
        columns(tc, toff, order + b * 64, n, 64, cols + boff[b]);
    }
    int8_t best8[64];
    int16_t best16[32];
    for (int i = 0; i < nq; i++) {
        const uint8_t *q = qc + qoff[i];
        int64_t m = qoff[i + 1] - qoff[i];
        int32_t *row = out + (int64_t)i * nt;
        int ns = 0;
        for (int b = 0; b < nb; b++) {
            int n = nt - b * 64 < 64 ? nt - b * 64 : 64;
            batch8(rows8, nalpha, q, m, cols + boff[b], blen[b], go, ge, buf, buf + mmax,
                   buf + 2 * mmax, best8);
            for (int l = 0; l < n; l++) {
                int k = order[b * 64 + l];
                if (best8[l] >= 127) sat[ns++] = k; else row[k] = best8[l];
            }
        }
        for (int s = 0; s < ns; s += 32) {
            int n = ns - s < 32 ? ns - s : 32;
            int64_t len = columns(tc, toff, sat + s, n, 32, cols16);
            batch16(rows16, nalpha, q, m, cols16, len, go, ge, buf, buf + mmax,
                    buf + 2 * mmax, best16);
            for (int l = 0; l < n; l++) row[sat[s + l]] = best16[l] >= 32767 ? -1 : best16[l];
        }
    }
    free(boff); free(blen); free(cols); free(cols16); free(buf); free(sat);
    return 0;
}
#else
int sw_simd_supported(void) { return 0; }
int sw_simd_scores(const int32_t *matrix, int nalpha, const uint8_t *qc, const int64_t *qoff,
                   int nq, const uint8_t *tc, const int64_t *toff, const int32_t *order, int nt,
                   int go, int ge, int32_t *out) { return -1; }
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sw_simd",
    "Smith-Waterman scores in AVX-512 lanes; called through ctypes (kernels/sw_simd.py).", -1,
    NULL};

PyMODINIT_FUNC PyInit__sw_simd(void) { return PyModule_Create(&module); }
