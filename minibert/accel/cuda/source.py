"""The CUDA C++ of minibert's row kernels, as CuPy compiles it (one source per kernel).

``T`` is the element type (float or double), set by ``REDUCE``'s typedef,
which every kernel is compiled after.  ``tests/cuda_on_cpu.py`` compiles
the same strings for the CPU.
"""
from functools import lru_cache

# Dropout's uniform number for element i of the draw keyed `key`, computed where it is used
# (minibert/accel/counter_rng.py has the same hash in NumPy, and says why):
#   z = mix64(key + (i + 1) * golden);  u = top 24 bits / 2^24 (float) or top 53 bits / 2^53 (double)
COUNTER_MIX = ("unsigned long long z = KEY + (unsigned long long)(IDX + 1) * 0x9E3779B97F4A7C15ULL;"
               " z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;"
               " z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;"
               " z ^= z >> 31;")
COUNTER_TO_T = ("sizeof(T) == 4 ? T((double)(z >> 40) * 5.9604644775390625e-08)"
                " : T((double)(z >> 11) * 1.1102230246251565e-16)")
COUNTER_UNIFORM_DEVICE = (
    "__device__ __forceinline__ T counter_uniform(unsigned long long key, long long i) {\n"
    "    " + COUNTER_MIX.replace("KEY", "key").replace("IDX", "i") + "\n"
    "    return " + COUNTER_TO_T + ";\n}\n"
    # draw n's key from the step's base, read from device memory (CounterUniform.next_draw):
    # mix64(base + n * golden), the hash above with n in place of i + 1
    "__device__ __forceinline__ unsigned long long draw_key(const unsigned long long* base, unsigned long long n) {\n"
    "    " + COUNTER_MIX.replace("KEY", "*base").replace("(unsigned long long)(IDX + 1)", "n") + "\n"
    "    return z;\n}\n")

# A block-wide sum and max: each warp reduces with shuffles, warp 0 reduces the
# per-warp results.  The leading __syncthreads() lets a kernel call these twice
# in a row with the same shared buffer.
REDUCE = r"""
typedef CTYPE T;
""" + COUNTER_UNIFORM_DEVICE + r"""
// A float16 as its 16 bits (unsigned short).  In mixed precision the attention kernels read the
// float16 product that feeds them and write the float16 operand of the next product themselves,
// instead of a separate pass that widens or rounds each (B, A, T, T) tensor.
__device__ __forceinline__ float half_to_float(unsigned short h) {
    const unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return __int_as_float((int)(sign | 0x7f800000u | (m << 13)));   // inf and NaN
    if (e) return __int_as_float((int)(sign | ((e + 112u) << 23) | (m << 13)));     // exponent bias 15 -> 127
    const float f = (float)m * 5.9604644775390625e-8f;                               // m 2^-24 (or zero)
    return sign ? -f : f;
}
__device__ __forceinline__ unsigned short float_to_half(float f) {   // to nearest, ties to even
    const unsigned int x = (unsigned int)__float_as_int(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);                    // NaN
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);                   // from 65520 on: inf
    if (a >= 0x38800000u)                                 // from 2^-14 on: a normal float16; adding half an
        return (unsigned short)(sign | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13));  // ulp rounds
    return (unsigned short)(sign | (unsigned int)rintf(__int_as_float((int)a) * 16777216.0f));  // m 2^-24
}
// a product the compiler may not fuse with the add or subtract after it (an FMA rounds once, the
// reference's two array expressions twice): for the same bits as the reference where it matters
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ T block_sum(T v, T* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : T(0);
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
__device__ T block_max(T v, T* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : sh[0];
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
"""

# The row kernels below (LayerNorm, attention's softmax) give each row a warp of 32 threads, which
# reduce with shuffles alone (no shared memory, no barrier), and a block holds ROWS_PER_BLOCK rows.
# A row of a few hundred values would leave a whole block's threads one or two values each and
# most of their time at barriers.
ROWS_PER_BLOCK = 8

# LayerNorm forward, one warp per row of H:
#   mean = sum(x) / H;  var = sum((x - mean)^2) / H;  rstd = 1 / sqrt(var + eps)
#   xhat = (x - mean) * rstd;  y = xhat * gamma + beta
# With has_res (the post-LN residual connection, ``residual.py``) what is normalised is
# dropout(a + bias) + x instead: the sum is made first, into y, with dropout's mask (0 or 1 / (1 - p))
# from the uniforms u (how = 1) or counter_uniform(key, k) (how = 2, the key draw_key(key_base, draw)),
# none without dropout (how = 0);
# a is read from ah as float16 bits where a_half (mixed precision's product), the bias added if has_bias.
LAYERNORM_FWD = r"""
extern "C" __global__ void layernorm_fwd(const T* x, const T* gamma, const T* beta, T* y, T* xhat,
                                         T* rstd, const int H, const long long rows, const T eps,
                                         const int has_res, const T* a, const unsigned short* ah, const int a_half,
                                         const T* bias, const int has_bias, const T* u,
                                         const unsigned long long* key_base, const unsigned long long draw,
                                         const int how, const T p, const T scale, T* mask) {
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;              // the whole warp: its shuffles below have all 32 lanes
    const int lane = threadIdx.x & 31;
    const T* xr = x + row * H;
    if (has_res) {                        // each lane reads back below only what it wrote here
        const unsigned long long key = how == 2 ? draw_key(key_base, draw) : 0ULL;
        for (int j = lane; j < H; j += 32) {
            const long long k = row * H + j;
            T d = a_half ? T(half_to_float(ah[k])) : a[k];
            if (has_bias) d = d + bias[j];
            if (how) {
                const T m = (how == 2 ? counter_uniform(key, k) : u[k]) >= p ? scale : T(0);
                mask[k] = m;
                d = d * m;
            }
            y[k] = d + xr[j];
        }
        xr = y + row * H;
    }
    T s = 0;
    for (int j = lane; j < H; j += 32) s += xr[j];
    const T mean = warp_sum(s) / T(H);
    T ss = 0;
    for (int j = lane; j < H; j += 32) { T d = xr[j] - mean; ss += d * d; }
    const T var = warp_sum(ss) / T(H);
    const T r = T(1) / sqrt(var + eps);
    for (int j = lane; j < H; j += 32) {
        T xh = (xr[j] - mean) * r;
        xhat[row * H + j] = xh;
        y[row * H + j] = xh * gamma[j] + beta[j];
    }
    if (lane == 0) rstd[row] = r;
}
"""

# LayerNorm backward (input gradient), one warp per row, with g = dy * gamma:
#   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
# and with has_mask, also dx * mask into dmasked (the residual connection's gradient through dropout);
# with has_skip, dy is dy + dy_skip, written into total (for the column sums of gamma and beta);
# a float16 dy (dy_half: a linear layer's dx in mixed precision) is read from dyh, widened into total.
LAYERNORM_BWD = r"""
extern "C" __global__ void layernorm_bwd(const T* dy, const unsigned short* dyh, const int dy_half, const T* xhat,
                                         const T* rstd, const T* gamma,
                                         T* dx, const int H, const long long rows, const int has_mask,
                                         const T* mask, T* dmasked, const int has_skip, const T* dy_skip,
                                         T* total) {
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = threadIdx.x & 31;
    const int write_total = has_skip || dy_half;      // the float32 gradient, for gamma's and beta's sums
    const T* d = write_total ? total + row * H : dy + row * H;
    const T* xh = xhat + row * H;
    T a = 0, b = 0;
    for (int j = lane; j < H; j += 32) {
        if (write_total) {                            // read back by this lane
            const T v = dy_half ? T(half_to_float(dyh[row * H + j])) : dy[row * H + j];
            total[row * H + j] = has_skip ? v + dy_skip[row * H + j] : v;
        }
        T g = d[j] * gamma[j]; a += g; b += g * xh[j];
    }
    const T mean_g = warp_sum(a) / T(H);
    const T mean_gx = warp_sum(b) / T(H);
    const T r = rstd[row];
    for (int j = lane; j < H; j += 32) {
        const T v = r * (d[j] * gamma[j] - mean_g - xh[j] * mean_gx);
        dx[row * H + j] = v;
        if (has_mask) dmasked[row * H + j] = v * mask[row * H + j];
    }
}
"""

# Attention probabilities, one warp per score row of Tk keys (a row's second and third reads hit
# the cache):
#   z = s * scale + bias[b];  p = exp(z - max z) / sum exp(z - max z)
#   dropout: keep = u >= p_drop;  p_d = keep ? p / (1 - p_drop) : 0
# bias is (B, Tk), the additive padding mask (used when has_bias); u the uniform draws (used
# when has_drop = 1), or, when has_drop = 2, counter_uniform(key, k) computed here (the key made from the
# step's base in device memory, draw_key(key_base, draw)).
# SCORE_T and PD_T are T, or unsigned short (float16) in mixed precision: ``typed`` below sets them.
# Without dropout probs_d is written only when write_pd (float16: the next product's operand).
ATTENTION_FWD = r"""
extern "C" __global__ void attention_fwd(const SCORE_T* s, const T* bias, const int has_bias, const T* u,
                                         const unsigned long long* key_base, const unsigned long long draw,
                                         const int has_drop, T* probs,
                                         PD_T* probs_d, const int write_pd, unsigned char* keep,
                                         bool* dead, const int Tk, const long long rows_per_batch,
                                         const long long rows, const T scale, const T p_drop, const T inv_keep) {
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;              // the whole warp: its shuffles below have all 32 lanes
    const int lane = threadIdx.x & 31;
    const SCORE_T* sr = s + row * Tk;
    const T* br = has_bias ? bias + (row / rows_per_batch) * Tk : 0;
    T m = neg_inf(T(0)), open = 0;
    for (int j = lane; j < Tk; j += 32) {
        T z = SCORE_IN(sr[j]) * scale;
        if (br) { z += br[j]; open = br[j] == T(0) ? T(1) : open; }
        m = fmax(m, z);
    }
    m = warp_max(m);
    // the sequence's first row says whether any of its keys is open (for the backward: a sequence
    // with none has a uniform softmax whatever its scores, so no gradient reaches them)
    if (br) {
        open = warp_max(open);
        if (lane == 0 && row % rows_per_batch == 0) dead[row / rows_per_batch] = open == T(0);
    }
    T total = 0;
    for (int j = lane; j < Tk; j += 32) {
        T z = SCORE_IN(sr[j]) * scale;
        if (br) z += br[j];
        total += exp(z - m);
    }
    total = warp_sum(total);
    const unsigned long long key = has_drop == 2 ? draw_key(key_base, draw) : 0ULL;
    for (int j = lane; j < Tk; j += 32) {
        T z = SCORE_IN(sr[j]) * scale;
        if (br) z += br[j];
        T p = exp(z - m) / total;
        long long k = row * Tk + j;
        probs[k] = p;
        if (has_drop) {
            bool kp = (has_drop == 2 ? counter_uniform(key, k) : u[k]) >= p_drop;
            keep[k] = kp;
            probs_d[k] = PD_OUT(kp ? p * inv_keep : T(0));
        } else if (write_pd) {
            probs_d[k] = PD_OUT(p);
        }
    }
}
"""

# Attention backward through dropout and softmax, one warp per row, in place on dp (D_T: T, or
# float16 in mixed precision, read and written as float16, the arithmetic in T):
#   dq_j = keep_j ? dp_j / (1 - p_drop) : 0      (dropout)
#   ds_j = p_j (dq_j - sum_k dq_k p_k) * scale   (softmax Jacobian, then the 1/sqrt(D) scale)
ATTENTION_BWD = r"""
extern "C" __global__ void attention_bwd(D_T* dp, const T* probs, const unsigned char* keep,
                                         const int has_drop, const int Tk, const long long rows,
                                         const T scale, const T inv_keep,
                                         const bool* dead, const int has_dead, const long long rows_per_seq) {
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = threadIdx.x & 31;
    D_T* d = dp + row * Tk;
    const T* p = probs + row * Tk;
    // a sequence with every key masked: its scores all became the same -max, so they carry no gradient
    if (has_dead && dead[row / rows_per_seq]) {
        for (int j = lane; j < Tk; j += 32) d[j] = D_OUT(T(0));
        return;
    }
    const unsigned char* kr = has_drop ? keep + row * Tk : 0;
    T dot = 0;
    for (int j = lane; j < Tk; j += 32) {
        const T dj = D_IN(d[j]);
        T g = kr ? (kr[j] ? dj * inv_keep : T(0)) : dj;
        dot += g * p[j];
    }
    dot = warp_sum(dot);
    for (int j = lane; j < Tk; j += 32) {
        const T dj = D_IN(d[j]);
        T g = kr ? (kr[j] ? dj * inv_keep : T(0)) : dj;
        d[j] = D_OUT(p[j] * (g - dot) * scale);
    }
}
"""



# The tickets of the kernels whose last block finishes the work (the column sums, in ``linear.py``;
# the loss's and the bookkeeping's means): at most this many groups of 32 columns (H up to 131,072).
COLSUM_MAX_GROUPS = 4096


# Many adds in one launch, dst_k[j] += src_k[j] for every pair k (``grads.py``).  table holds four
# numbers a pair: dst's address, src's address, where its elements start in the concatenation of
# all the pairs (ascending), and 1 where src is float16 (mixed precision's weight gradients, widened
# here, exactly, instead of by a pass of their own); thread i finds its pair by a binary search.
ADD_MANY = r"""
extern "C" __global__ void add_many(const long long* table, const int pairs, const long long total) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int lo = 0, hi = pairs - 1;                 // the last pair that starts at or before i
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (table[4 * mid + 2] <= i) lo = mid; else hi = mid - 1;
        }
        T* dst = (T*)table[4 * lo];
        const long long j = i - table[4 * lo + 2];
        if (table[4 * lo + 3]) dst[j] += T(half_to_float(((const unsigned short*)table[4 * lo + 1])[j]));
        else dst[j] += ((const T*)table[4 * lo + 1])[j];
    }
}
"""


@lru_cache(maxsize=None)       # one string per kernel and precision: the compiled-kernel cache looks it up each call
def typed(kernel: str, half: bool) -> str:
    """An attention kernel's source with its storage types set: T throughout, or float16 (its bits as
    unsigned short) for the scores and probs_d of the forward kernel and dp of the backward one."""
    typ, load, store = ("unsigned short", "half_to_float", "float_to_half") if half else ("T", "", "")
    for name in ("SCORE", "PD", "D"):       # in this order: "PD_T" holds "D_T"
        kernel = kernel.replace(f"{name}_T", typ).replace(f"{name}_IN", load).replace(f"{name}_OUT", store)
    return kernel
