package ggml

import "unsafe"

// HostPtrBufferType is the buffer type of the buffers BufferFromHostPtr
// makes on this device (on the CPU the type named "CPU_Mapped", which is
// not the device's default type), found by making one over a page.
// Tensors that llama.cpp places "beside" a mapped weight (a LoRA
// adapter's) are allocated from it.
func (d *Device) HostPtrBufferType() (_ BufferType, err error) {
	defer placed(&err, "dev_buffer_from_host_ptr", at{dev: d})
	page, err := anonPage()
	if err != nil {
		return BufferType{}, err
	}
	defer freePage(page)
	buf, err := d.BufferFromHostPtr(unsafe.Pointer(&page[0]), uint64(len(page)), uint64(len(page)))
	if err != nil {
		return BufferType{}, err
	}
	defer buf.Free()
	return buf.Type(), nil
}
