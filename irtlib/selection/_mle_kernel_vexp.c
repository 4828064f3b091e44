/* A PROTOTYPE, opt-in only: _mle_kernel.c with glibc's vector exp in its score terms (mle_terms).
 * Loaded by irtlib.selection.score_kernel.load_vector_exp when IRTLIB_MLE_VECTOR_EXP=1; its
 * estimates differ from the default kernel's in their last bits (see _mle_kernel.c). */
#define MLE_VECTOR_EXP 1
#include "_mle_kernel.c"
