module {
  tt.func @f() {
    %0 = arith.constant {value = 0 : i32 : i32
