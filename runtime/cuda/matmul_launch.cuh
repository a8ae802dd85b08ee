/* matmul_launch.cuh: which matmul kernel (matmul_kernel.cuh) a launch
 * takes, with its grid, its weights' stage in shared memory, its L2 policy
 * and its first wave's pacing, all chosen from the launch's shape and
 * measured on the device (BENCHMARKS.md); and the entries a generated
 * kernels.cu instantiates for a model's row lengths
 * (CUDA_MATMUL_INSTANCE, CUDA_MATMUL_TYPED). */
#ifndef MINFER_CUDA_MATMUL_LAUNCH_CUH
#define MINFER_CUDA_MATMUL_LAUNCH_CUH

#include <atomic>
#include <stdlib.h>

#include "cuda/matmul_kernel.cuh"

/* The warps of a team in a loop launch of one quantized type: 2 (the 8B's
 * Q6_K down 15.3 -> 13.8 us, tg128 x1.013; 4 warps gave the same 13.8 and
 * x1.009), or MINFER_MM_TEAM (for measurements: 0 for matmul_loop_kernel,
 * or 4). */
static inline int team_warps(void)
{
    static std::atomic<long long> m{ -1 };
    const long long v = measured_setting("MINFER_MM_TEAM", 2, 0, 4, &m);
    return v == 0 || v == 4 ? (int)v : 2;
}

/* The team launch of b for rows rows, smem the loop's stages of a CTA. */
template <int T, int K, int TW, class FIX>
static void launch_team(struct mm_args b, size_t smem, cudaStream_t s)
{
    constexpr int G = group_blocks<T>();
    const int64_t trips = (b.k / (QK8 * G) + 31) / 32;
    smem += (size_t)4 * LOOP_STAGES * trips * G * 32 * sizeof(float);
    static const bool opted = (cuda_smem_opt_in((const void *)matmul_team_kernel<T, K, TW, FIX>, 200 * 1024), true);
    (void)opted;
    const size_t per_sm = cuda_sm_shared_bytes() / (smem + 1024) < 2 ? 1 : 2; /* the kernel's bound */
    const int64_t most = (int64_t)per_sm * cuda_sm_count();
    launch(matmul_team_kernel<T, K, TW, FIX>, dim3((unsigned)(most < b.tiles ? most : b.tiles)), 4 * TW * 32, smem, s, b);
}

/* The loop launch pays where one tile a CTA holds fewer than 8 CTAs an SM
 * by its stage: the 8B's Q6_K FFN down (rows of 12288, 40 KiB a CTA, 5 an
 * SM) 16.0 -> 14.4 us; the launches of smaller stages were slower as loops
 * (4096 x 4096 Q4_K 4.7 -> 5.1-7.3 us, the output matrix 126 -> 144-196;
 * minfer-gpu-bench). A CTA stage above LOOP_KIB KiB; MINFER_MM_LOOP=KIB
 * sets it for measurements (0: every staged launch). */
#define LOOP_KIB 28
static inline size_t loop_above(void)
{
    static std::atomic<long long> m{ -1 };
    return (size_t)measured_setting("MINFER_MM_LOOP", LOOP_KIB, 0, 1 << 20, &m) * 1024;
}

/* The loop launch of a (a.stage bytes a warp and stage) for rows rows,
 * where it pays (loop_above) and its stages fit 3/4 of an SM's shared
 * memory, at as many CTAs an SM as fit there: the rest is room for the
 * next launch's CTAs to enter early. Rows of one quantized type take the
 * team kernel (team_warps), two CTAs an SM. */
template <int T, int K, bool PAIR, class FIX>
static bool launch_loop(struct mm_args b, int64_t rows, cudaStream_t s)
{
    const size_t smem = (size_t)4 * LOOP_STAGES * b.stage, room = cuda_sm_shared_bytes() * 3 / 4;
    if ((size_t)4 * b.stage <= loop_above() || smem > room || smem > 200 * 1024)
        return false;
    static const bool opted = (cuda_smem_opt_in((const void *)matmul_loop_kernel<T, K, PAIR, FIX>, 200 * 1024), true);
    (void)opted;
    b.tiles = (rows + 3) / 4;
    if constexpr (!PAIR && T != TYPE_MIXED && T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16) {
        if (team_warps() == 2) {
            launch_team<T, K, 2, FIX>(b, smem, s);
            return true;
        }
        if (team_warps() == 4) {
            launch_team<T, K, 4, FIX>(b, smem, s);
            return true;
        }
    }
    const int64_t most = (int64_t)(room / smem) * cuda_sm_count();
    launch(matmul_loop_kernel<T, K, PAIR, FIX>, dim3((unsigned)(most < b.tiles ? most : b.tiles)), 4 * 32, smem, s, b);
    return true;
}

/* Whether a row of k gives each lane of its warp at most one group of
 * blocks (row_sums): then the warp's fixed costs (its stage's wait, the
 * butterflies, the gate) outweigh its dot products, and a decode pair
 * takes two rows of gate and two of up a warp. The 0.5B's Q5_0 pair (rows
 * of 896: 28 blocks) x1.019 in tg128; the 8B's Q4_K pair (rows of 4096:
 * two groups a lane) lost (x0.94: 17.6 -> 18.3 us, fewer warps in flight). */
template <int T>
static inline bool short_rows(int64_t k)
{
    return k <= (int64_t)32 * QK8 * group_blocks<T>();
}

static inline bool even_rows(const struct mm_args &a)
{
    for (int i = 0; i < a.n_mat; i++)
        if (a.m[i].n % 2)
            return false;
    return true;
}

/* The shared memory a warp of a decode launch takes to stage its rows
 * (rw of each matrix it reads), or 0 where they are read from global
 * memory instead: before sm_90 or with MINFER_NO_STAGE=1, rows that are
 * not whole 16-byte units, or more than most bytes a CTA (48 KiB: no
 * opt-in needed). */
static inline unsigned stage_bytes(const struct mm_args &a, int rw, int warps, size_t most_cta = 48 * 1024)
{
    if (!cuda_stage_enabled())
        return 0;
    const int n = a.epi == CUDA_EPI_PAIR ? 2 : a.n_mat;
    size_t most = 0, both = 0;
    for (int i = 0; i < n; i++) {
        if (a.m[i].row_bytes % 16)
            return 0;
        most = a.m[i].row_bytes > most ? a.m[i].row_bytes : most;
        both += a.m[i].row_bytes;
    }
    const size_t per = (size_t)rw * (a.epi == CUDA_EPI_PAIR ? both : most);
    return per * (size_t)warps <= most_cta ? (unsigned)per : 0;
}

/* The CTAs an SM holds at once of kernel k launched with threads and smem
 * bytes each, asked once per smem size (memo: smem << 8 | CTAs an SM);
 * unknown (the query failed) reads as fallback, and a failed launch then
 * reports itself. */
static inline int occupancy_per_sm(void (*k)(struct mm_args), int threads, size_t smem, int fallback,
                                   std::atomic<long long> *memo)
{
    long long m = memo->load(std::memory_order_relaxed);
    if (m < 0 || (size_t)(m >> 8) != smem) {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem) != cudaSuccess)
            cudaGetLastError(), per_sm = fallback;
        memo->store(m = (long long)smem << 8 | per_sm, std::memory_order_relaxed);
    }
    return (int)(m & 0xff);
}

/* Whether a staged launch of ctas CTAs of 4 warps, smem bytes each, should
 * take the kernel held to 8 CTAs an SM (FULL): when it has more CTAs than
 * the SMs hold at once of the kernel as compiled (`free`; unknown: 8, as
 * compiled), and 8 fit in an SM's shared memory. Q6_K's output matrix
 * (151936 rows of 4096) went from 145 to 125 us (82% -> 96% of copy
 * bandwidth); held throughout, the 0.5B's short launches lost 3%
 * (minfer-gpu-bench, tg128 A/B). */
static inline bool full_pays(void (*free)(struct mm_args), int64_t ctas, unsigned smem, std::atomic<long long> *memo)
{
    const int per_sm = occupancy_per_sm(free, 4 * 32, smem, 8, memo);
    return per_sm < 8 && 8 * (size_t)smem <= 200 * 1024 && ctas > (int64_t)per_sm * cuda_sm_count();
}

/* Whether a decode launch's weights pass through L2 first to go
 * (l2_evict_first), on sm_90: 2, the staged rows' copies and the unstaged
 * rows' asks into L2; or MINFER_MM_EVICT (for measurements): 0 neither, 1
 * the copies alone, 3 the copies, and the asks into L2 by bulk prefetches
 * of the default policy (2's control). */
static inline int l2_first_enabled(void)
{
    static std::atomic<long long> m{ -1 };
    return cuda_stage_enabled() ? (int)measured_setting("MINFER_MM_EVICT", 2, 0, 3, &m) : 0;
}

/* A staged decode launch's pacing (stage_pace), set for the kernel k of
 * ctas CTAs, threads and smem bytes each: PACE_RATE bytes a ns, the CTAs
 * paced the occupancy's first wave (memo: occupancy_per_sm's), where
 * the launch stages PACE_MIN_MIB or more; MINFER_MM_PACE=R another rate,
 * 0 none (for measurements). Measured (tg128 A/B): 8B Q4_K_M x1.065, Q8_0
 * x1.045, the 0.5B even (only its output matrix paced). 4000 or 6000
 * B/ns gained less, a PACE_MIN_MIB of 16 (the 8B's attn_output unpaced)
 * less, every launch paced (the 0.5B's short ones) lost 3%, and 8 CTAs
 * an SM paced from their entry whatever the occupancy lost the Q8_0's
 * gain (its 34 KiB CTAs, 5 an SM: the later ones waited twice). */
#define PACE_RATE 5000
#define PACE_MIN_MIB 8
static inline void pace_set(struct mm_args *b, void (*k)(struct mm_args), unsigned ctas, int threads, size_t smem,
                            std::atomic<long long> *memo)
{
    static std::atomic<long long> rate{ -1 };
    b->pace_rate = (unsigned)measured_setting("MINFER_MM_PACE", PACE_RATE, 0, 1 << 20, &rate);
    if (!b->pace_rate || (size_t)ctas * smem < ((size_t)PACE_MIN_MIB << 20)) {
        b->pace_rate = 0;
        return;
    }
    /* unknown occupancy: none paced */
    b->pace_ctas = (unsigned)(occupancy_per_sm(k, threads, smem, 0, memo) * cuda_sm_count());
}

#define LONG_STAGE_KIB 64 /* launch_step's 2-warp CTAs' stage at most */

/* The pieces a tile's rows are asked for in where the 2-warp staged Q8_0
 * launch takes the persistent piece kernel (matmul_piece_kernel): 1, the
 * default (tg128 8B Q8_0 x1.012 on an H200, 387.0 against form 5's
 * 382.5); MINFER_MM_PIECES=N (for measurements): 0 form 5, one tile a
 * CTA's warp; 2 to PIECES_MAX more pieces (4 lost, x0.954; 8, x0.846;
 * BENCHMARKS, forty-second session). */
static inline int pieces_count(void)
{
    static std::atomic<long long> m{ -1 };
    return (int)measured_setting("MINFER_MM_PIECES", 1, 0, PIECES_MAX, &m);
}

/* The piece kernel's pace (its whole grid is its first wave, and each
 * CTA's tiles are fixed, so a paced CTA's two tiles both start late):
 * pace_set's rate, or MINFER_MM_PIECE_PACE=R another (0: none), for
 * measurements. On an H100's timeline its CTAs enter over ~10 us (the
 * pace spreads them 5.5), and a tile's work takes ~8 us while the
 * launch's first wave streams, ~4 after (BENCHMARKS, forty-seventh
 * session). */
static inline unsigned piece_pace(unsigned rate)
{
    static std::atomic<long long> m{ -1 };
    return rate ? (unsigned)measured_setting("MINFER_MM_PIECE_PACE", rate, 0, 1 << 20, &m) : 0;
}

/* A decode step's launch (one column) of W warps, RW rows each, its
 * weights staged in shared memory where stage_bytes allows. (The pair with
 * its Q8_1 product is not: staged, its 3072 CTAs took 25.6 us, not 21.7,
 * for Q4_K; the 8B Q8_0's tg128 x0.918.) */
template <int T, int K, int W, int RW, bool PAIR, class FIX>
static void launch_step(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    struct mm_args b = a;
    b.stage = stage_bytes(a, RW, W);
    b.l2_first = l2_first_enabled();
    b.pace_rate = 0;
    static std::atomic<long long> paced4{ -1 }, paced_full{ -1 }, paced{ -1 };
    const unsigned spin = PAIR && a.spin_y ? SPIN_CTAS : 0; /* a spinning pair's quantizing CTAs come first */
    if constexpr (W == 8) { /* rows too long for 8 warps' stages (Q8_0's 16 rows of 4096: 68 KiB): 4 warps staged */
        if (!b.stage && (b.stage = stage_bytes(a, RW, 4)) != 0) {
            const auto k4 = matmul_kernel<T, 4, 1, false, K, RW, true, false, PAIR, FIX>;
            const unsigned ctas = (unsigned)((rows / RW + 3) / 4) + spin;
            pace_set(&b, k4, ctas, 4 * 32, 4 * (size_t)b.stage, &paced4);
            launch(k4, dim3(ctas), 4 * 32, 4 * (size_t)b.stage, s, b);
            return;
        }
        /* too long for 4 (the 8B Q8_0's down, rows of 12288: 104 KiB): 2
         * warps staged, opted in past 48 KiB (52 KiB, 4 CTAs an SM), rather
         * than 8 unstaged warps asking the whole matrix into L2 at once
         * (BENCHMARKS, thirty-fourth session) */
        if constexpr (RW == 2 && !PAIR)
            if (!b.stage && (b.stage = stage_bytes(a, RW, 2, LONG_STAGE_KIB * 1024)) != 0) {
                const auto k2 = matmul_kernel<T, 2, 1, false, K, RW, true, false, PAIR, FIX>;
                static const bool opted = (cuda_smem_opt_in((const void *)k2, LONG_STAGE_KIB * 1024), true);
                (void)opted;
                static std::atomic<long long> paced2{ -1 };
                unsigned ctas = (unsigned)((rows / RW + 1) / 2);
                if constexpr (T == TYPE_Q8_0)
                    if ((b.pieces = pieces_count()) != 0) { /* persistent: as many CTAs as the SMs hold */
                        const auto kp = matmul_piece_kernel<T, K, FIX>;
                        static const bool opted_p = (cuda_smem_opt_in((const void *)kp, LONG_STAGE_KIB * 1024), true);
                        (void)opted_p;
                        static std::atomic<long long> pacedp{ -1 };
                        const int per_sm = occupancy_per_sm(kp, 2 * 32, 2 * (size_t)b.stage, 4, &pacedp);
                        const unsigned most = (unsigned)(per_sm * cuda_sm_count());
                        b.tiles = rows / RW;
                        ctas = most && most < ctas ? most : ctas;
                        pace_set(&b, kp, ctas, 2 * 32, 2 * (size_t)b.stage, &pacedp);
                        b.pace_rate = piece_pace(b.pace_rate);
                        launch(kp, dim3(ctas), 2 * 32, 2 * (size_t)b.stage, s, b);
                        return;
                    }
                pace_set(&b, k2, ctas, 2 * 32, 2 * (size_t)b.stage, &paced2);
                launch(k2, dim3(ctas), 2 * 32, 2 * (size_t)b.stage, s, b);
                return;
            }
    }
    const dim3 grid((unsigned)((rows / RW + W - 1) / W) + spin);
    if constexpr (W == 4 && RW == 1) {
        if (b.stage && !spin && launch_loop<T, K, PAIR, FIX>(b, rows, s))
            return;
        static std::atomic<long long> memo{ -1 };
        if (b.stage && full_pays(matmul_kernel<T, W, 1, false, K, RW, true, false, PAIR, FIX>, grid.x - spin, W * b.stage, &memo)) {
            const auto full = matmul_kernel<T, W, 1, false, K, RW, true, true, PAIR, FIX>;
            pace_set(&b, full, grid.x, W * 32, (size_t)W * b.stage, &paced_full);
            launch(full, grid, W * 32, (size_t)W * b.stage, s, b);
            return;
        }
    }
    if (b.stage) {
        const auto staged = matmul_kernel<T, W, 1, false, K, RW, true, false, PAIR, FIX>;
        pace_set(&b, staged, grid.x, W * 32, (size_t)W * b.stage, &paced);
        launch(staged, grid, W * 32, (size_t)W * b.stage, s, b);
    } else
        launch(matmul_kernel<T, W, 1, false, K, RW, false, false, PAIR, FIX>, grid, W * 32, 0, s, b);
}

/* One launch of type T over the rows of a.m, with the row length K fixed
 * (or 0: a.k): a decode step's one column (BATCH false: the fewest
 * registers), or groups of eight columns. Q8_0 rows stream best with 8
 * warps a CTA, the rest with 4, and Q8_0 with two rows a warp sharing each
 * activation load (4096 x 4096: 54% -> 61% of copy bandwidth; Q4_K there
 * fell to 35% and Q6_K to 56%, half as many warps in flight; all measured
 * with minfer-gpu-bench). A pair with its product as Q8_1 has 4 warps. */
template <int T, int K, bool BATCH, class FIX = mm_runtime>
static void launch_t(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    constexpr int W = T == TYPE_Q8_0 ? 8 : 4;
    if constexpr (BATCH) {
        const unsigned groups = (unsigned)((a.nt + 7) / 8);
        if (a.q8_out)
            launch(matmul_kernel<T, 32, 8, true, K>, dim3((unsigned)(rows / 32), groups), 32 * 32, 0, s, a);
        else
            launch(matmul_kernel<T, 4, 8, false, K>, dim3((unsigned)((rows + 3) / 4), groups), 4 * 32, 0, s, a);
    } else {
        if constexpr (T == TYPE_Q8_0) /* two rows a warp: see above */
            if (a.epi != CUDA_EPI_PAIR && even_rows(a)) {
                launch_step<T, K, W, 2, false, FIX>(a, rows, s);
                return;
            }
        if constexpr (T != TYPE_MIXED && W == 4 && T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16)
            if (a.epi == CUDA_EPI_PAIR && short_rows<T>(a.k) && even_rows(a)) {
                launch_step<T, K, W, 2, true, FIX>(a, rows, s);
                return;
            }
        if (a.epi == CUDA_EPI_PAIR)
            launch_step<T, K, W, 1, true, FIX>(a, rows, s);
        else
            launch_step<T, K, W, 1, false, FIX>(a, rows, s);
    }
}

/* The launch for type t (a tensor type, or TYPE_MIXED). */
template <int K, bool BATCH>
static void launch_shape(int t, const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    switch (t) {
    case TYPE_F32: launch_t<TYPE_F32, K, BATCH>(a, rows, s); break;
    case TYPE_F16: launch_t<TYPE_F16, K, BATCH>(a, rows, s); break;
    case TYPE_BF16: launch_t<TYPE_BF16, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_0: launch_t<TYPE_Q4_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_1: launch_t<TYPE_Q4_1, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_0: launch_t<TYPE_Q5_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_1: launch_t<TYPE_Q5_1, K, BATCH>(a, rows, s); break;
    case TYPE_Q8_0: launch_t<TYPE_Q8_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_K: launch_t<TYPE_Q4_K, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_K: launch_t<TYPE_Q5_K, K, BATCH>(a, rows, s); break;
    case TYPE_Q6_K: launch_t<TYPE_Q6_K, K, BATCH>(a, rows, s); break;
    case TYPE_MIXED: launch_t<TYPE_MIXED, K, BATCH>(a, rows, s); break;
    default: break;
    }
}

/* A generated kernels.cu's decode launch ID of one model: row length K,
 * type T (TYPE_MIXED: the matrices' types differ), row sets N0..N2 of
 * types T0..T2 (cuda_kernel's typed entries). */
#define CUDA_MATMUL_TYPED(ID, K, T, N0, N1, N2, T0, T1, T2) \
    static void cuda_matmul_typed##ID(int type, const struct mm_args *a, int64_t rows, void *stream) \
    { \
        (void)type; \
        launch_t<T, K, false, mm_fixed<N0, N1, N2, T0, T1, T2>>(*a, rows, (cudaStream_t)stream); \
    }

/* A generated kernels.cu's decode matmuls for row length K (a model's k). */
#define CUDA_MATMUL_INSTANCE(K) \
    static void cuda_matmul_k##K(int type, const struct mm_args *a, int64_t rows, void *stream) \
    { \
        launch_shape<K, false>(type, *a, rows, (cudaStream_t)stream); \
    }

#endif
