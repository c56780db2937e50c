// tile_sizes.h: the default tile sizes of the tiled GPU kernels (gemm_tiled.h and
// conv_implicit_gemm.cl) when the host passes none. The host always passes them as -D options
// (its parameter sets); these are the textbook sizes that course lesson 11 and its figure of
// the tiling use: a 64 x 64 tile of C per work-group, 16 values of K per step, a 4 x 4 block
// of C per work-item.

#ifndef KUIPER_TILE_SIZES_H
#define KUIPER_TILE_SIZES_H

#ifndef TILE_M
#define TILE_M 64
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef TILE_K
#define TILE_K 16
#endif
#ifndef WPT_M
#define WPT_M 4
#endif
#ifndef WPT_N
#define WPT_N 4
#endif

#endif  // KUIPER_TILE_SIZES_H
