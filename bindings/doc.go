// Package bindings opens the pinned native ggml release and exposes its C API
// as one table of typed Go functions, without cgo.
//
// It owns everything that touches purego or the C ABI: finding the libraries
// (GGLOAD_LIB_DIR, native/lib/<platform>[-variant], the user cache, beside
// the executable), installing the pinned prebuilt sets from an npm registry
// (Install: checked against the pin's sha256, unpacked in Go), refusing a
// release other than the pin, the function table, entry points that
// backends publish through ggml_backend_reg_get_proc_address, the C struct
// mirrors (checked against the library at open), and the route from ggml's
// log to log/slog.
//
// Nothing here validates arguments: a wrong value passed through the
// function table can hit a native assert and kill the process. Package ggml
// is the checked, idiomatic layer; only it and tests should call the table.
// Install, Find and CacheDir serve any program that sets up the libraries
// (ggload fetch is one).
package bindings
