package httpsrc

// SetWindowLimits sets the most bytes the header window keeps and the
// slide's length, and returns what puts them back.
func SetWindowLimits(head, slide int64) (restore func()) {
	h, s := headerMax, slideLen
	headerMax, slideLen = head, slide
	return func() { headerMax, slideLen = h, s }
}

// WindowBytes is the memory the reader's header window holds now.
func WindowBytes(r *Reader) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(cap(r.head.slide))
	for _, s := range r.head.segs {
		n += int64(cap(s))
	}
	return n
}
