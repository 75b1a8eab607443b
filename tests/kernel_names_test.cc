// Kernel names as reports write them on one line: the H200 captures' demangled C++ names ran to
// 400 characters, and a plain 90-character cut ended inside their parameter lists.

#include "analyzer/model/kernel_names.h"

#include <catch2/catch.hpp>
#include <string>

using gpuxray::model::reportedKernelName;

TEST_CASE("kernel names: a report's line drops a C++ signature's parameters, then cuts at 90") {
  CHECK(
      reportedKernelName("void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, "
                         "int, int, int, int, int, int, float const*, float const*, float, float, int, int, int*, "
                         "int*)") == "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>");
  CHECK(reportedKernelName("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_"
                           "64x64_8x5_tn_align1::Params)") ==
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>");
  CHECK(reportedKernelName("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, "
                           "32u, 32u, 64u, false>(long, long, float const*, float const*, float*, float*)") ==
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, floa...");
  CHECK(reportedKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(reportedKernelName("void f(int) const") == "void f");
  // Not a parameter list: a lambda's enclosing function, words in parentheses.
  CHECK(reportedKernelName("at::native::f(at::TensorIteratorBase&)::{lambda()#1}") ==
        "at::native::f(at::TensorIteratorBase&)::{lambda()#1}");
  CHECK(reportedKernelName("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)");
  CHECK(reportedKernelName("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT") == "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT");
  // Long without parameters: cut, the cut marked.
  const std::string long_name(120, 'k');
  CHECK(reportedKernelName(long_name) == std::string(87, 'k') + "...");
  CHECK(reportedKernelName("void k<1>(int)", 8) == "void ...");
}
