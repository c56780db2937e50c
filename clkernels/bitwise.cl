// Bitwise and logical operators, elementwise with broadcasting: y = a OP b (or OP a).
// Good for integer masks and flags: torch.bitwise_* on integer/bool tensors, torch.logical_*
// on anything (nonzero is true, the result is a 0/1 byte).
//
// Build options: TA, TB (operand types), TO (output type), BITS (bits of TO, for the shifts),
// IS_BOOL (1 when the output is bool),
// OP (which operator, a name below), FLAT (1: every operand has the output's shape, so the
// element index is the offset; 0: clkernels/broadcast.h finds each operand's element).
// A unary operator reads b = a. A scalar pnnx wrote as a parameter is a one-element buffer.
#include "broadcast.h"

#define AND 0
#define OR 1
#define XOR 2
#define NOT 3
#define SHL 4
#define SHR 5
#define LAND 6
#define LOR 7
#define LXOR 8
#define LNOT 9

__kernel void bitwise(__global const TA *a, __global const TB *b, __global TO *y,
                      __global const int *meta, const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
#if FLAT
    const TA ra = a[i];
    const TB rb = b[i];
#else
    const TA ra = a[broadcast_offset(i, meta, rank, 0)];
    const TB rb = b[broadcast_offset(i, meta, rank, 1)];
#endif
    const TO x = (TO)ra, z = (TO)rb;  // bitwise operators work in the output type
#if OP == AND
    y[i] = x & z;
#elif OP == OR
    y[i] = x | z;
#elif OP == XOR
    y[i] = x ^ z;
#elif OP == NOT && IS_BOOL  // ~ on a bool is "not", not 0xfe
    y[i] = !x;
#elif OP == NOT
    y[i] = ~x;
#elif OP == SHL  // OpenCL takes the count modulo BITS; PyTorch gives 0 outside [0, BITS)
    y[i] = (z >= 0 && z < BITS) ? (TO)(x << z) : (TO)0;
#elif OP == SHR  // ... and the sign for a right shift
    y[i] = (z >= 0 && z < BITS) ? (TO)(x >> z) : (TO)(x < 0 ? -1 : 0);
#elif OP == LAND  // logical operators test the operands in their own types (0.5 is true)
    y[i] = ra != 0 && rb != 0;
#elif OP == LOR
    y[i] = ra != 0 || rb != 0;
#elif OP == LXOR
    y[i] = (ra != 0) != (rb != 0);
#else
    y[i] = ra == 0;
#endif
}
