/* weight_layout.c: the GPU's row layout (see weight_layout.h). */
#include "cuda/weight_layout.h"

#include <stdbool.h>
#include <string.h>

size_t cuda_row_bytes(enum tensor_type t, int64_t k)
{
    const struct type_info *ti = type_info(t);
    const size_t gguf = (size_t)(k / ti->block_elems) * ti->block_bytes;
    return cuda_planes_of(t).n ? (gguf + 15) & ~(size_t)15 : gguf;
}

/* One row: from GGUF blocks into planes (pack), or back. */
static void row_move(const struct cuda_planes *pl, int64_t nb, size_t block_bytes, const uint8_t *from, uint8_t *to,
                     bool pack)
{
    size_t plane = 0;
    for (int f = 0; f < pl->n; f++) {
        for (int64_t j = 0; j < nb; j++) {
            const size_t in_block = (size_t)j * block_bytes + (size_t)pl->off[f];
            const size_t in_plane = plane + (size_t)j * (size_t)pl->size[f];
            memcpy(to + (pack ? in_plane : in_block), from + (pack ? in_block : in_plane), (size_t)pl->size[f]);
        }
        plane += (size_t)nb * (size_t)pl->size[f];
    }
}

static void rows_move(enum tensor_type t, int64_t k, int64_t rows, const uint8_t *src, uint8_t *dst, bool pack)
{
    const struct type_info *ti = type_info(t);
    const struct cuda_planes pl = cuda_planes_of(t);
    const int64_t nb = k / ti->block_elems;
    const size_t gguf = (size_t)nb * ti->block_bytes, stored = cuda_row_bytes(t, k);
    if (!pl.n) {
        memcpy(dst, src, (size_t)rows * gguf);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const size_t from = (size_t)r * (pack ? gguf : stored), to = (size_t)r * (pack ? stored : gguf);
        row_move(&pl, nb, ti->block_bytes, src + from, dst + to, pack);
        if (pack)
            memset(dst + to + gguf, 0, stored - gguf);
    }
}

void cuda_rows_pack(enum tensor_type t, int64_t k, int64_t rows, const void *src, void *dst)
{
    rows_move(t, k, rows, src, dst, true);
}

void cuda_rows_unpack(enum tensor_type t, int64_t k, int64_t rows, const void *src, void *dst)
{
    rows_move(t, k, rows, src, dst, false);
}
