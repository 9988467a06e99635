module {
  // ÿþ not text
}
