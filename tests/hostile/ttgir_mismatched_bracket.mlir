module {
  tt.func @f(%a: i32) {
    %x = "foo.bar"(%a] : (i32) -> i32
    tt.return
  }
}
