module {
  tt.func @f() {
    ttng.barrier_expect %1, %true : !ttg.memdesc<1xi64, #s, #smem, mutable>
  }
}
