module {
  tt.func @f() {
    %2 = ttng.warp_group_dot %0, %1, %c : !ttg.memdesc<128x64xf16, #s, #smem> * !ttg.memdesc<64x128xf16, #s, #smem> -> tensor<128x128xf32, #mma>
    tt.return
  }
}
