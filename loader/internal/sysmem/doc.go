// Package sysmem holds the loader's primitives over the process's own
// memory: memory mapped outside Go's heap (Map), locked in RAM (Lock),
// advised huge pages and faulted in ahead of its first writes (Prefault),
// a file mapping's pages mapped in on other goroutines (PopulateMapped),
// and the anonymous memory a native library maps (AnonMemory,
// AdviseNewMemory).
//
// The last is for memory the loader cannot see otherwise. Software
// devices (lavapipe and the like) keep a device buffer in this process's
// memory: anonymous pages the driver maps when the buffer is allocated,
// and every upload is a copy into them on a CPU. Fresh, those pages cost
// one fault per 4 KiB as the first upload writes them, which is most of
// such a load's time; with transparent huge pages, one per 2 MiB. The
// driver does not ask for huge pages, and ggml hides the address, so the
// memory is found by what appeared in the process's address space while
// the buffer was allocated, and huge pages are advised there before
// anything is written. A GPU's driver maps no anonymous memory of the
// buffer's size into the process (device memory lies behind the driver's
// file, or nowhere here), so nothing is advised for it; advice on memory
// that belongs to something else only changes how its pages are backed.
//
// Advice and prefaulting are Linux only; elsewhere they do nothing, and
// the memory is faulted in by its first writes.
package sysmem
