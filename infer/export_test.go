package infer

// Prepare is Decode's checks of a batch (llama_batch_allocr::init), alone.
func (c *Context) Prepare(b Batch) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	_, err := c.prepare(b, c.embeddings())
	return err
}
