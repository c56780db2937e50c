// Lesson 14: your LayerNorm2d kernel (exercises.py's LayerNorm2dOpenCL builds this file).
//
// Write one __kernel here, with the arguments your bind() sets, in that order. A plan that
// works well: one work-item per pixel (n, h, w) of the (N, C, H, W) input; it walks the C
// values of its pixel, which lie H * W floats apart, three times: their mean, the mean of the
// squares of (x - mean), then y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c].
// Work-items past the last pixel (the global size is rounded up) must do nothing.
//
// Delete the next line when you start: it only makes the untouched stub fail to compile with
// a message that says so.
#error "lesson 14: write the layernorm2d kernel in course_notes/14_your_operator/layernorm2d.cl"
