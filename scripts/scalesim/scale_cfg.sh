#!/usr/bin/env bash
# Writes a SCALE-Sim v3 scale.cfg on stdout: an 8x8 array, USER bandwidth,
# 4 words per cycle from DRAM into each read buffer.
# Usage: scale_cfg.sh RUN_NAME DATAFLOW IFMAP_KB FILTER_KB
set -euo pipefail
name="${1:?run name}" df="${2:?dataflow}" ifmap="${3:?ifmap KiB}" filter="${4:?filter KiB}"
cat <<CFG
[general]
run_name = $name

[architecture_presets]
ArrayHeight:    8
ArrayWidth:     8
IfmapSramSzkB:    $ifmap
FilterSramSzkB:   $filter
OfmapSramSzkB:    64
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 4
Dataflow : $df
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 4
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 4
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
CFG
