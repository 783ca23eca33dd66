"""The CUDA C++ of fused attention for training in mixed precision (``flash.py`` launches it).

float16 q, k, v of head size 64; the products on the tensor cores with float32 sums, the
softmax, its mask and dropout in float32 between them.  The (T, T) scores and weights never
reach memory: the forward keeps a running maximum m and sum l per query row (online softmax,
ladder rung v4) and saves both, m and 1 / l; the backward recomputes the weights from them,
P = exp(z - m) / l.  (One number, m + log(l), would do for most rows; in a sequence whose every
key is padded, m is the most negative float, and log(l) vanishes beside it.)

A block is 4 warps and a tile 64 rows (16 a warp).  Tensor cores multiply a 16 x 16 float16
tile A by a 16 x 8 tile B into 16 x 8 float32 (PTX's mma.m16n8k16), each of a warp's 32
lanes holding a fixed part of each tile in registers.  With g = lane / 4 and c = 2 (lane % 4):

    a = {A[g][c, c+1], A[g+8][c, c+1], A[g][c+8, c+9], A[g+8][c+8, c+9]}   (four pairs of halves)
    b = {B[c, c+1][g], B[c+8, c+9][g]}                                     (two pairs)
    d = {D[g][c], D[g][c+1], D[g+8][c], D[g+8][c+1]}                        (four floats)

The layout of d, two rows of the lane's group, two neighbouring columns, is that of a's
pairs: a product's result, rounded to float16, is the A operand of the next product without
leaving the registers (the weights P, then P v).
"""

FLASH_COMMON = r"""
#define FD 64          // the head size (every preset's): 4 steps of 16 along d
#define FT 64          // the rows of a tile, 16 to a warp
#define LDS 72         // a tile's row in shared memory, in halves: 64 and 8 more, so that rows start on
                       // different banks
#ifndef MINIBERT_CPU
__device__ __forceinline__ void mma16816(float* d, const unsigned int* a, const unsigned int* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
// two float16 (their bits) in one register, the first in the low half
__device__ __forceinline__ unsigned int halves(unsigned short lo, unsigned short hi) {
    return lo | ((unsigned int)hi << 16);
}
__device__ __forceinline__ unsigned int halves_f(float lo, float hi) { return halves(float_to_half(lo), float_to_half(hi)); }

// rows r0 .. r0 + FT of a head into shared memory, its rows ld apart; rows from Tn on are zeros
__device__ void load_tile(unsigned short* dst, const unsigned short* src, const int r0, const int Tn, const int ld) {
    for (int i = threadIdx.x; i < FT * FD; i += blockDim.x) {
        const int r = i / FD, c = i % FD;
        dst[r * LDS + c] = r0 + r < Tn ? src[(long long)(r0 + r) * ld + c] : (unsigned short)0;
    }
}

// a warp's 16 rows of a head (rows ld apart) as A operands, one per step of 16 along d; r is the
// lane's first row (its second is r + 8)
__device__ void load_rows(unsigned int (*a)[4], const unsigned short* src, const int r, const int Tn, const int ld) {
    const int c = 2 * (threadIdx.x & 3);
    const unsigned short* x0 = src + (long long)r * ld;
    const unsigned short* x1 = x0 + 8 * ld;
    #pragma unroll
    for (int s = 0; s < FD / 16; ++s) {
        const int j = 16 * s + c;
        a[s][0] = r < Tn ? halves(x0[j], x0[j + 1]) : 0u;
        a[s][1] = r + 8 < Tn ? halves(x1[j], x1[j + 1]) : 0u;
        a[s][2] = r < Tn ? halves(x0[j + 8], x0[j + 9]) : 0u;
        a[s][3] = r + 8 < Tn ? halves(x1[j + 8], x1[j + 9]) : 0u;
    }
}

// a warp's 16 rows of an accumulator (16 x FD, as times_tile leaves it), row r divided by div[0] and
// row r + 8 by div[1], rounded to float16 into a head's rows, ld apart; rows from Tn on are not written
__device__ void store_rows(unsigned short* dst, const float (*acc)[4], const int r, const int Tn, const int ld,
                           const float* div) {
    const int c = 2 * (threadIdx.x & 3);
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (r + 8 * h >= Tn) continue;
        unsigned short* row = dst + (long long)(r + 8 * h) * ld + c;
        #pragma unroll
        for (int n = 0; n < FD / 8; ++n) {
            row[8 * n] = float_to_half(acc[n][2 * h] / div[h]);
            row[8 * n + 1] = float_to_half(acc[n][2 * h + 1] / div[h]);
        }
    }
}

// s (16 x FT, 8 tiles of 8 columns) += a (16 x FD) tile^T:  s[i][j] = row i . tile row j
__device__ void times_rows(float (*s)[4], const unsigned int (*a)[4], const unsigned short* tile) {
    const int g = (threadIdx.x & 31) >> 2, c = 2 * (threadIdx.x & 3);
    #pragma unroll
    for (int n = 0; n < FT / 8; ++n) {
        const unsigned short* row = tile + (8 * n + g) * LDS + c;
        #pragma unroll
        for (int s2 = 0; s2 < FD / 16; ++s2) {
            const unsigned int b[2] = {halves(row[16 * s2], row[16 * s2 + 1]), halves(row[16 * s2 + 8], row[16 * s2 + 9])};
            mma16816(s[n], a[s2], b);
        }
    }
}

// o (16 x FD) += p (16 x FT, as times_rows leaves it) rounded to float16, times tile (FT x FD)
__device__ void times_tile(float (*o)[4], const float (*p)[4], const unsigned short* tile) {
    const int g = (threadIdx.x & 31) >> 2, c = 2 * (threadIdx.x & 3);
    #pragma unroll
    for (int s2 = 0; s2 < FT / 16; ++s2) {
        const float* p0 = p[2 * s2];
        const float* p1 = p[2 * s2 + 1];
        const unsigned int a[4] = {halves_f(p0[0], p0[1]), halves_f(p0[2], p0[3]), halves_f(p1[0], p1[1]), halves_f(p1[2], p1[3])};
        const unsigned short* col = tile + (16 * s2 + c) * LDS + g;
        #pragma unroll
        for (int n = 0; n < FD / 8; ++n) {
            const unsigned int b[2] = {halves(col[8 * n], col[LDS + 8 * n]), halves(col[8 * LDS + 8 * n], col[9 * LDS + 8 * n])};
            mma16816(o[n], a, b);
        }
    }
}

// the max (sum) of the four lanes that hold a row
__device__ __forceinline__ float quad_max(float x) {
    x = fmax(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmax(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// dropout's factor for weight (i, j) of head bh: 1 / (1 - p) where kept, 0 where dropped, 1 without
// dropout; the same draw as the unfused kernel's for element (bh T + i) T + j (``source.ATTENTION_FWD``)
__device__ __forceinline__ float drop_factor(const int has_drop, const unsigned long long key, const long long bh,
                                             const int i, const int j, const int Tn, const float p_drop,
                                             const float inv_keep) {
    if (!has_drop) return 1.0f;
    return counter_uniform(key, (bh * Tn + i) * Tn + j) >= p_drop ? inv_keep : 0.0f;
}

// the coordinates every kernel starts from: a block is tile (blockIdx.x % tiles) of head bh; q, k, v
// and their gradients are (B, A, T, D), a head's rows FD apart from head on; the output and its
// gradient are (B, T, A, D), as the projection after attention reads them (merge_heads a view), a
// head's rows A FD apart from merged on
#define FLASH_SETUP                                                                      \
    const int tiles = (Tn + FT - 1) / FT, g = (threadIdx.x & 31) >> 2, c = 2 * (threadIdx.x & 3); \
    const long long bh = blockIdx.x / tiles, head = bh * Tn * FD;                        \
    const long long merged = (bh / A) * Tn * A * FD + (bh % A) * FD;                     \
    const int ldm = A * FD;                                                              \
    const int b = (int)(bh / A), r = (int)(blockIdx.x % tiles) * FT + 16 * (threadIdx.x >> 5) + g; \
    const T* br = has_bias ? bias + (long long)b * Tn : 0;                               \
    const unsigned long long key = has_drop ? draw_key(key_base, draw) : 0ULL;
"""

# The forward: a block per (head, 64 queries), the keys and values streamed through shared memory
# 64 at a time.  For each key tile: z = q k^T scale + bias (-inf past the sequence), the running
# maximum m raised to the tile's, the sum l and the output o rescaled by exp(m_old - m_new), then
# p = exp(z - m) added into l, dropped (p / (1 - p_drop) or 0) and multiplied into o by v.
# At the end out = o / l (float16), and m and 1 / l are kept for the backward (``stats``).  The first block of each sequence writes
# whether it has no open key (``dead``, for the backward, as ``attention_fwd`` does).
FLASH_FWD = r"""
extern "C" __global__ void flash_fwd(const unsigned short* q, const unsigned short* k, const unsigned short* v,
                                     const T* bias, const int has_bias, const unsigned long long* key_base,
                                     const unsigned long long draw, const int has_drop, unsigned short* out,
                                     T* stats, bool* dead, const int Tn, const int A, const T scale, const T p_drop,
                                     const T inv_keep) {
    __shared__ unsigned short ks[FT * LDS], vs[FT * LDS];
    __shared__ T red[32];
    FLASH_SETUP
    if (has_bias && bh % A == 0 && blockIdx.x % tiles == 0) {     // the same for the whole block
        T open = 0;
        for (int j = threadIdx.x; j < Tn; j += blockDim.x) open = br[j] == T(0) ? T(1) : open;
        open = block_max(open, red);
        if (threadIdx.x == 0) dead[b] = open == T(0);
    }
    unsigned int qa[FD / 16][4];
    load_rows(qa, q + head, r, Tn, FD);
    float m[2] = {neg_inf(0.0f), neg_inf(0.0f)}, l[2] = {0.0f, 0.0f}, o[FD / 8][4] = {};
    for (int j0 = 0; j0 < Tn; j0 += FT) {
        __syncthreads();                        // every warp is done with the tiles before
        load_tile(ks, k + head, j0, Tn, FD);
        load_tile(vs, v + head, j0, Tn, FD);
        __syncthreads();
        float s[FT / 8][4] = {};
        times_rows(s, qa, ks);
        float mx[2] = {m[0], m[1]};
        #pragma unroll
        for (int n = 0; n < FT / 8; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int j = j0 + 8 * n + c + (e & 1);
                s[n][e] = j < Tn ? s[n][e] * scale + (br ? br[j] : 0.0f) : neg_inf(0.0f);
                mx[e >> 1] = fmax(mx[e >> 1], s[n][e]);
            }
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = quad_max(mx[h]);
            const float alpha = exp(m[h] - mx[h]);
            l[h] *= alpha;
            #pragma unroll
            for (int n = 0; n < FD / 8; ++n) { o[n][2 * h] *= alpha; o[n][2 * h + 1] *= alpha; }
            m[h] = mx[h];
        }
        #pragma unroll
        for (int n = 0; n < FT / 8; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = r + 8 * (e >> 1), j = j0 + 8 * n + c + (e & 1);
                const float p = exp(s[n][e] - m[e >> 1]);
                l[e >> 1] += p;
                s[n][e] = i < Tn && j < Tn ? p * drop_factor(has_drop, key, bh, i, j, Tn, p_drop, inv_keep) : 0.0f;
            }
        times_tile(o, s, vs);
    }
    const float total[2] = {quad_sum(l[0]), quad_sum(l[1])};
    store_rows(out + merged, o, r, Tn, ldm, total);
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int i = r + 8 * h;
        if (i < Tn && c == 0) { stats[2 * (bh * Tn + i)] = m[h]; stats[2 * (bh * Tn + i) + 1] = 1.0f / total[h]; }
    }
}
"""

# The backward, in two kernels that recompute the weights P = exp(z - m) / l tile by tile, with
# Delta_i = dout_i . out_i (= sum_j P_ij dP_ij, dropout included):
#   dP = dout v^T, through dropout;  dS = P (dP - Delta) scale   (softmax's Jacobian, then 1 / sqrt(D))
#   dq = dS k   (flash_bwd_dq: a block per 64 queries, over the key tiles; it writes Delta first)
#   dv = P_dropped^T dout,  dk = dS^T q   (flash_bwd_dkdv: a block per 64 keys, over the query tiles)
# Each output is summed by one block, in a fixed order: no atomics, the same bits every run.
# A sequence with no open key (dead) has a uniform softmax whatever its scores: dS = 0.
FLASH_BWD_DQ = r"""
extern "C" __global__ void flash_bwd_dq(const unsigned short* q, const unsigned short* k, const unsigned short* v,
                                        const unsigned short* out, const unsigned short* dout, const T* stats,
                                        T* delta, const T* bias, const int has_bias, const bool* dead,
                                        const unsigned long long* key_base, const unsigned long long draw,
                                        const int has_drop, unsigned short* dq, const int Tn, const int A,
                                        const T scale, const T p_drop, const T inv_keep) {
    __shared__ unsigned short ks[FT * LDS], vs[FT * LDS];
    FLASH_SETUP
    const bool gone = has_bias && dead[b];
    float M[2], IL[2], D[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {            // Delta of the lane's rows, a quarter of d each lane
        const int i = r + 8 * h;
        float acc = 0.0f;
        if (i < Tn)
            #pragma unroll
            for (int d = 0; d < FD / 4; ++d) {
                const long long at = merged + (long long)i * ldm + 8 * c + d;
                acc += half_to_float(dout[at]) * half_to_float(out[at]);
            }
        D[h] = quad_sum(acc);
        M[h] = i < Tn ? stats[2 * (bh * Tn + i)] : 0.0f;
        IL[h] = i < Tn ? stats[2 * (bh * Tn + i) + 1] : 0.0f;
        if (i < Tn && c == 0) delta[bh * Tn + i] = D[h];
    }
    unsigned int qa[FD / 16][4], da[FD / 16][4];
    load_rows(qa, q + head, r, Tn, FD);
    load_rows(da, dout + merged, r, Tn, ldm);
    float acc[FD / 8][4] = {};
    for (int j0 = 0; j0 < Tn; j0 += FT) {
        __syncthreads();
        load_tile(ks, k + head, j0, Tn, FD);
        load_tile(vs, v + head, j0, Tn, FD);
        __syncthreads();
        float s[FT / 8][4] = {}, dp[FT / 8][4] = {};
        times_rows(s, qa, ks);
        times_rows(dp, da, vs);
        #pragma unroll
        for (int n = 0; n < FT / 8; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int h = e >> 1, i = r + 8 * h, j = j0 + 8 * n + c + (e & 1);
                float ds = 0.0f;
                if (i < Tn && j < Tn && !gone) {
                    const float p = exp(s[n][e] * scale + (br ? br[j] : 0.0f) - M[h]) * IL[h];
                    const float f = drop_factor(has_drop, key, bh, i, j, Tn, p_drop, inv_keep);
                    ds = p * (dp[n][e] * f - D[h]) * scale;
                }
                s[n][e] = ds;
            }
        times_tile(acc, s, ks);
    }
    const float one[2] = {1.0f, 1.0f};
    store_rows(dq + head, acc, r, Tn, FD, one);
}
"""

# dk and dv: the lane's rows are keys here (r, r + 8), and the products give the transposed weights,
# S^T = k q^T and dP^T = v dout^T, whose rows are keys and columns queries.
FLASH_BWD_DKDV = r"""
extern "C" __global__ void flash_bwd_dkdv(const unsigned short* q, const unsigned short* k, const unsigned short* v,
                                          const unsigned short* dout, const T* stats, const T* delta, const T* bias,
                                          const int has_bias, const bool* dead, const unsigned long long* key_base,
                                          const unsigned long long draw, const int has_drop, unsigned short* dk,
                                          unsigned short* dv, const int Tn, const int A, const T scale,
                                          const T p_drop, const T inv_keep) {
    __shared__ unsigned short qs[FT * LDS], dos[FT * LDS];
    __shared__ T Ms[FT], ILs[FT], Ds[FT];
    FLASH_SETUP
    const bool gone = has_bias && dead[b];
    const float bj[2] = {br && r < Tn ? br[r] : 0.0f, br && r + 8 < Tn ? br[r + 8] : 0.0f};
    unsigned int ka[FD / 16][4], va[FD / 16][4];
    load_rows(ka, k + head, r, Tn, FD);
    load_rows(va, v + head, r, Tn, FD);
    float dka[FD / 8][4] = {}, dva[FD / 8][4] = {};
    for (int i0 = 0; i0 < Tn; i0 += FT) {
        __syncthreads();
        load_tile(qs, q + head, i0, Tn, FD);
        load_tile(dos, dout + merged, i0, Tn, ldm);
        for (int t = threadIdx.x; t < FT; t += blockDim.x) {
            Ms[t] = i0 + t < Tn ? stats[2 * (bh * Tn + i0 + t)] : T(0);
            ILs[t] = i0 + t < Tn ? stats[2 * (bh * Tn + i0 + t) + 1] : T(0);
            Ds[t] = i0 + t < Tn ? delta[bh * Tn + i0 + t] : T(0);
        }
        __syncthreads();
        float s[FT / 8][4] = {}, dp[FT / 8][4] = {};
        times_rows(s, ka, qs);
        times_rows(dp, va, dos);
        #pragma unroll
        for (int n = 0; n < FT / 8; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int h = e >> 1, j = r + 8 * h, t = 8 * n + c + (e & 1), i = i0 + t;
                float pd = 0.0f, ds = 0.0f;
                if (i < Tn && j < Tn) {
                    const float p = exp(s[n][e] * scale + bj[h] - Ms[t]) * ILs[t];
                    const float f = drop_factor(has_drop, key, bh, i, j, Tn, p_drop, inv_keep);
                    pd = p * f;
                    if (!gone) ds = p * (dp[n][e] * f - Ds[t]) * scale;
                }
                s[n][e] = pd;
                dp[n][e] = ds;
            }
        times_tile(dva, s, dos);
        times_tile(dka, dp, qs);
    }
    const float one[2] = {1.0f, 1.0f};
    store_rows(dk + head, dka, r, Tn, FD, one);
    store_rows(dv + head, dva, r, Tn, FD, one);
}
"""
