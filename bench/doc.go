// Package bench measures our ipvsadm against Debian's ipvsadm 1.31 in the
// lab, in one VM boot: the time of -Ln (empty table and 1,000 services ×
// 10 destinations), -Sn and -R at the sizes the project promises, and the
// peak memory of -R and -Ln with 10,000 × 10. Ours and the reference run
// alternately, several times each, and the medians are compared.
//
// It holds only a lab test (bench_lab_test.go, build tag lab). `make bench`
// gives it the long test timeout the full size needs and prints the table
// that docs/benchmarks.md records; in a plain `make lab` (ten-minute test
// timeout) it measures small tables, as a check that the measurements
// still work. Durations are reported, never asserted: the
// VM's speed varies with the host's load. Peak memory is asserted, because
// it does not.
package bench
