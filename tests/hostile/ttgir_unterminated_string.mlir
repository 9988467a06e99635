module {
  tt.func @f() {
    proton.record start "SIMFA|MB_WAIT|bar=%1
    tt.return
  }
}
