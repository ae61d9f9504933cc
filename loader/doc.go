// Package loader carries out a place.Plan: it maps or opens the model's
// files, creates the weight contexts and buffers, moves every byte to its
// device by the path the load mode calls for, validates, releases what is
// no longer needed, and returns a Model whose tensors live on their devices
// until Close.
//
// The paths, as in llama.cpp's load_all_data:
//   - mmap: a tensor inside a buffer made from the mapping costs nothing
//     (zero copy); other tensors are copied from the mapping;
//   - no mmap, host buffer: the file is read straight into the tensor;
//   - no mmap, device buffer: through a ring of pinned staging buffers with
//     asynchronous uploads and events, or, when the device cannot, one
//     synchronous copy per chunk.
//
// Faults are errors: a file that shrank, a mapping that cannot be read, an
// allocation a device refuses, a cancelled context all end the load with an
// error that names the tensor, device or file, and free everything the load
// had made.
package loader
