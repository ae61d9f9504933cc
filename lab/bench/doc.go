// Package bench times loads of a GGUF model by ggload against llama.cpp
// of the same pin, each load in a fresh process, beside this machine's
// floor for the case: what its reads and uploads cost alone. It is what
// `ggload-bench` runs.
//
// The package owns the measurements, the floors, the statistics, the
// report and its printing, the generated model, the HTTP link of
// --http, and what a measured process does and prints (RunLoad). It
// parses no command line and starts no process by itself: its caller
// (lab/ggload-bench) parses the options into Options, opens the runtime,
// and says how a process that makes one Load is started
// (Options.Command) and which backend modules it registers
// (Options.CPUModules); the CLI's hidden command reads that Load back
// and calls RunLoad.
//
// Its parts: bench.go (the run, its cases and the measured processes
// seen from the parent), child.go (the measured process and what it
// prints), floor.go (the floors), stats.go (medians and ranges),
// print.go (the table and the goals), scale.go (several sizes),
// http.go (loads over HTTP), model.go (the generated model), and the
// system calls of the floors and the cold loads, by platform.
package bench
