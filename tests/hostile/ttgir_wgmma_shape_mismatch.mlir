#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
module {
  tt.func @f() {
    %2 = ttng.warp_group_dot %0, %1, %c : !ttg.memdesc<128x64xf16, #s, #smem> * !ttg.memdesc<32x128xf16, #s, #smem> -> tensor<128x128xf32, #mma>
    tt.return
  }
}
