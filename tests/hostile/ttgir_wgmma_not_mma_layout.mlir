#blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module {
  tt.func @f() {
    %2 = ttng.warp_group_dot %0, %1, %c : !ttg.memdesc<128x64xf16, #s, #smem> * !ttg.memdesc<64x128xf16, #s, #smem> -> tensor<128x128xf32, #blocked>
    tt.return
  }
}
